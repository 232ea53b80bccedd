//! Getting chime without Rust: `scripts/package-deb` makes a Debian package that installs with
//! dpkg, and `chime up` runs from the installed binary.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use chime_tests::{TestEnv, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deb_installs_and_chime_up_runs_from_it() -> Result<()> {
    let root = nix::unistd::Uid::effective().is_root();
    let dpkg = std::path::Path::new("/usr/bin/dpkg-deb").exists();
    if !(root && dpkg) {
        ensure!(
            std::env::var("CHIME_REQUIRE_PACKAGE").as_deref() != Ok("1"),
            "installing a package needs root and dpkg"
        );
        eprintln!("skipped: installing a package needs root and dpkg");
        return Ok(());
    }
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::env::temp_dir().join(format!("chime-deb-{}", uuid::Uuid::now_v7().simple()));
    // The binary the tests built, packaged as a release one is (stripped, with its units).
    let built = tokio::process::Command::new(repo.join("scripts/package-deb"))
        .arg("--binary")
        .arg(chime_tests::chime_binary()?)
        .arg("--out")
        .arg(&out)
        .output()
        .await?;
    ensure!(built.status.success(), "{built:?}");
    let deb = String::from_utf8(built.stdout)?.trim().to_string();
    let contents = tokio::process::Command::new("dpkg-deb")
        .args(["-c", &deb])
        .output()
        .await?;
    let contents = String::from_utf8(contents.stdout)?;
    for file in [
        "./usr/bin/chime",
        "./lib/systemd/system/chime-worker.service",
        "./lib/systemd/system/chime-scheduler.service",
        "./etc/chime/chime.env",
        // The man pages: the command's and each subcommand's.
        "./usr/share/man/man1/chime.1.gz",
        "./usr/share/man/man1/chime-job-create.1.gz",
        "./usr/share/man/man1/chime-apply.1.gz",
    ] {
        ensure!(
            contents.contains(file),
            "{file} is not in the package:\n{contents}"
        );
    }
    let installed = tokio::process::Command::new("dpkg")
        .args(["-i", &deb])
        .output()
        .await?;
    ensure!(installed.status.success(), "{installed:?}");
    let ran = run_installed().await;
    let removed = tokio::process::Command::new("dpkg")
        .args(["--purge", "chime"])
        .output()
        .await?;
    let _ = std::fs::remove_dir_all(&out);
    ran?;
    ensure!(removed.status.success(), "{removed:?}");
    Ok(())
}

/// `chime up` from /usr/bin/chime answers its readiness check and runs a task.
async fn run_installed() -> Result<()> {
    let env = TestEnv::new().await?;
    let port = chime_tests::free_port()?;
    let api = format!("http://127.0.0.1:{port}");
    let mut up = tokio::process::Command::new("/usr/bin/chime")
        .args(["up", "--api-addr", &format!("127.0.0.1:{port}")])
        .env("CHIME_DATABASE_URL", &env.settings.database_url)
        .env("CHIME_AMQP_URL", &env.settings.amqp_url)
        .env("CHIME_PREFIX", &env.settings.prefix)
        .env("CHIME_CONFIG", "/nonexistent/chime.toml")
        .env("CHIME_WORKER__ALLOW_OPEN_STORE", "true")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("running the installed chime")?;
    let http = chime_tests::http();
    eventually("the installed chime up to be ready", || async {
        Ok(http
            .get(format!("{api}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success()))
    })
    .await?;
    let out = tokio::process::Command::new("/usr/bin/chime")
        .args([
            "submit",
            "--kind",
            "shell",
            "--wait",
            "--",
            "echo",
            "from the package",
        ])
        .env("CHIME_API_URL", &api)
        .env("CHIME_CONFIG", "/nonexistent/chime.toml")
        .output()
        .await?;
    ensure!(out.status.success(), "{out:?}");
    ensure!(String::from_utf8(out.stdout)?.contains("from the package"));
    let _ = up.start_kill();
    let _ = tokio::time::timeout(Duration::from_secs(10), up.wait()).await;
    env.cleanup().await
}
