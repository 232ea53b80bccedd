//! chime's end-to-end test harness: each test gets its own PostgreSQL database and AMQP prefix, so
//! tests run in parallel against the real shared servers; services run in-process (as `chime up`
//! runs them) and the CLI runs as a real binary.

pub mod browser;
pub mod postgres;
pub mod proxy;
pub mod rabbitmq;

use std::future::Future;
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use chime_cli::commands::services::{Services, run_until};
use chime_core::config::{Overrides, Settings};
use chime_core::model::{TaskStatus, TaskView};
use chime_core::store::{Store, tasks};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The shared servers (override with CHIME_TEST_DATABASE_URL / CHIME_TEST_AMQP_URL).
pub fn server_urls() -> (String, String) {
    (
        std::env::var("CHIME_TEST_DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into()),
        std::env::var("CHIME_TEST_AMQP_URL")
            .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into()),
    )
}

/// The shared broker's `host:port` (from [`server_urls`]).
pub fn broker_address() -> String {
    chime_core::bus::connection::node_address(&server_urls().1)
}

/// The shared broker's URL, with its user, password and virtual host, reached at
/// `127.0.0.1:port` instead (a proxy in front of it, or a port where nothing listens).
pub fn amqp_url_at(port: u16) -> String {
    let url = server_urls().1;
    let (scheme, rest) = url.split_once("://").unwrap_or(("amqp", &url));
    let (credentials, after) = match rest.split_once('@') {
        Some((credentials, after)) => (format!("{credentials}@"), after),
        None => (String::new(), rest),
    };
    let vhost = after.find(['/', '?']).map_or("", |i| &after[i..]);
    format!("{scheme}://{credentials}127.0.0.1:{port}{vhost}")
}

/// The user the test suite connects to the shared broker as (`guest` by default).
pub fn broker_user() -> String {
    let url = server_urls().1;
    url.split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
        .map(|(credentials, _)| credentials.split(':').next().unwrap_or("guest").to_string())
        .unwrap_or_else(|| "guest".into())
}

/// Sends the in-process services' logs (warnings and errors, or what `RUST_LOG` asks for) to the
/// running test's captured output, which the harness shows when the test fails: a failure then
/// says what the services saw. Once per test process.
fn capture_service_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .with_ansi(false)
        .try_init();
}

/// A test's isolated installation: a database and an AMQP prefix of its own.
pub struct TestEnv {
    /// Settings pointing at the test's database and prefix.
    pub settings: Settings,
    /// The test's database name.
    pub database: String,
    /// The PostgreSQL server it lives on (`postgres://…:port`, no database).
    pub pg_server: String,
    /// A store on the test's database (migrated).
    pub store: Store,
    services: Vec<(CancellationToken, JoinHandle<Result<()>>)>,
    /// The processes it started ([`TestEnv::track`]), by pidfd: one stays the same process
    /// after its pid was reaped and reused, so cleanup never signals a stranger.
    children: std::sync::Mutex<Vec<std::os::fd::OwnedFd>>,
}

impl TestEnv {
    /// A fresh database and prefix, migrated; no service running yet.
    pub async fn new() -> Result<Self> {
        let (pg, amqp) = server_urls();
        Self::with_amqp_url(&pg, &amqp).await
    }

    /// Like [`TestEnv::new`], with the services' AMQP connection going to `amqp_url` (a proxy).
    pub async fn with_amqp_url(pg_server: &str, amqp_url: &str) -> Result<Self> {
        capture_service_logs();
        let id = Uuid::now_v7().simple().to_string();
        let suffix = &id[id.len() - 12..];
        let database = format!("chime_test_{suffix}");
        let port = free_port()?;
        let settings = Settings::load(Overrides {
            database_url: Some(format!("{pg_server}/{database}")),
            amqp_url: Some(amqp_url.to_string()),
            prefix: Some(format!("t{suffix}")),
            api_addr: Some(format!("127.0.0.1:{port}")),
            api_url: Some(format!("http://127.0.0.1:{port}")),
            config_file: Some(PathBuf::from("/nonexistent/chime.toml")),
            ..Overrides::default()
        })?;
        // Tests run side by side on one PostgreSQL: keep each process's pool small. The shared
        // servers trust loopback connections: workers run tasks anyway (tests that check the
        // refusal turn this off).
        let mut settings = Settings {
            db_pool_size: Some(4),
            ..settings
        };
        settings.worker.allow_open_store = true;
        let store = Store::connect(&settings.database_url, 4).await?;
        Ok(Self {
            settings,
            database,
            pg_server: pg_server.to_string(),
            store,
            services: Vec::new(),
            children: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Like [`TestEnv::new`], with the services' AMQP connection going through a proxy the test
    /// can cut.
    pub async fn behind_proxy() -> Result<(Self, proxy::Proxy)> {
        let proxy = proxy::Proxy::start(&broker_address()).await?;
        let (pg, _) = server_urls();
        let amqp = amqp_url_at(proxy.port());
        Ok((Self::with_amqp_url(&pg, &amqp).await?, proxy))
    }

    /// A proxy in front of this test's PostgreSQL, and the database URL through it: for one
    /// process the test can refuse, slow or cut while the others get through.
    pub async fn database_proxy(&self) -> Result<(proxy::Proxy, String)> {
        let mut url = reqwest::Url::parse(&self.settings.database_url)?;
        let upstream = format!(
            "{}:{}",
            url.host_str().context("a database host")?,
            url.port().unwrap_or(5432)
        );
        let proxy = proxy::Proxy::start(&upstream).await?;
        url.set_port(Some(proxy.port()))
            .map_err(|()| anyhow::anyhow!("cannot set the port of {url}"))?;
        Ok((proxy, url.to_string()))
    }

    /// Starts `chime worker --concurrency N` reaching PostgreSQL through a proxy of its own
    /// ([`TestEnv::database_proxy`]), to cut, refuse or slow that worker alone; killed when
    /// the handle is dropped.
    pub async fn proxied_worker(
        &self,
        concurrency: u16,
    ) -> Result<(proxy::Proxy, tokio::process::Child)> {
        let (proxy, url) = self.database_proxy().await?;
        let worker = self.spawn_chime_with(
            &["worker", "--concurrency", &concurrency.to_string()],
            &[("CHIME_DATABASE_URL", url.as_str())],
        )?;
        Ok((proxy, worker))
    }

    /// The URL of the API (once started).
    pub fn api_url(&self) -> &str {
        &self.settings.api_url
    }

    /// Starts services in-process, as `chime up` would; waits until the API answers /readyz if
    /// it is one of them, else until the broker is connected.
    pub async fn start(&mut self, services: Services) -> Result<()> {
        let shutdown = CancellationToken::new();
        let settings = self.settings.clone();
        let stop = shutdown.clone();
        let handle = tokio::spawn(async move { run_until(settings, services, stop).await });
        self.services.push((shutdown, handle));
        if services.api {
            let url = format!("{}/readyz", self.api_url());
            eventually("the API to be ready", || async {
                Ok(reqwest_get_status(&url).await? == 200)
            })
            .await?;
        }
        Ok(())
    }

    /// Stops every service started, cleanly, and waits for them.
    pub async fn stop(&mut self) -> Result<()> {
        for (shutdown, _) in &self.services {
            shutdown.cancel();
        }
        for (_, handle) in self.services.drain(..) {
            tokio::time::timeout(Duration::from_secs(30), handle)
                .await
                .context("services did not stop within 30 s")???;
        }
        Ok(())
    }

    /// Creates a noop job `name` that sleeps `sleep_ms`, concurrent or not.
    pub async fn noop_job(&self, name: &str, concurrent: bool, sleep_ms: u64) -> Result<()> {
        chime_core::store::jobs::create(
            &self.store,
            chime_core::store::jobs::NewJob {
                name: name.into(),
                kind: "noop".into(),
                spec: serde_json::json!({ "sleep_ms": sleep_ms }),
                concurrent: Some(concurrent),
                ..Default::default()
            },
        )
        .await?;
        Ok(())
    }

    /// A task as the store has it.
    pub async fn task(&self, id: Uuid) -> Result<TaskView> {
        Ok(tasks::get(&self.store, id).await?)
    }

    /// Waits until the task reaches a terminal status.
    pub async fn wait_terminal(&self, id: Uuid) -> Result<TaskView> {
        eventually("the task to end", || async {
            Ok(self.task(id).await?.status.is_terminal())
        })
        .await?;
        self.task(id).await
    }

    /// Waits until the task has this status.
    pub async fn wait_status(&self, id: Uuid, status: TaskStatus) -> Result<TaskView> {
        eventually(&format!("the task to be {status}"), || async {
            Ok(self.task(id).await?.status == status)
        })
        .await?;
        self.task(id).await
    }

    /// A direct AMQP connection to the shared broker (not through any proxy).
    pub async fn amqp(&self) -> Result<lapin::Connection> {
        let (_, amqp) = server_urls();
        Ok(lapin::Connection::connect(&amqp, lapin::ConnectionProperties::default()).await?)
    }

    /// Runs the `chime` binary with this installation's settings in its environment.
    pub async fn chime(&self, args: &[&str]) -> Result<Output> {
        Ok(tokio::process::Command::new(chime_binary()?)
            .args(args)
            .env("CHIME_DATABASE_URL", &self.settings.database_url)
            .env("CHIME_AMQP_URL", &self.settings.amqp_url)
            .env("CHIME_PREFIX", &self.settings.prefix)
            .env("CHIME_API_URL", &self.settings.api_url)
            .env("CHIME_CONFIG", "/nonexistent/chime.toml")
            .env_remove("DATABASE_URL")
            .env_remove("CHIME_API_TOKEN")
            .kill_on_drop(true)
            .output()
            .await?)
    }

    /// [`TestEnv::chime`], failing unless it succeeded; returns the last line it printed (an id,
    /// a name, a secret).
    pub async fn chime_ok(&self, args: &[&str]) -> Result<String> {
        let out = self.chime(args).await?;
        anyhow::ensure!(out.status.success(), "chime {args:?} failed: {out:?}");
        Ok(last_line(&out))
    }

    /// `chime submit ARGS…`; fails unless it succeeded; returns the task's id.
    pub async fn submit(&self, args: &[&str]) -> Result<Uuid> {
        let mut full = vec!["submit"];
        full.extend_from_slice(args);
        let out = self.chime(&full).await?;
        anyhow::ensure!(out.status.success(), "chime submit failed: {out:?}");
        Ok(last_line(&out).parse()?)
    }

    /// Starts the `chime` binary as a long-running process (a service) with this installation's
    /// settings; it is killed when the handle is dropped.
    pub fn spawn_chime(&self, args: &[&str]) -> Result<tokio::process::Child> {
        self.spawn_chime_with(args, &[])
    }

    /// Like [`TestEnv::spawn_chime`], with extra environment variables.
    pub fn spawn_chime_with(
        &self,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> Result<tokio::process::Child> {
        // CHIME_TEST_SERVICE_LOGS=DIR keeps each service's output in DIR, at INFO, to see what
        // a failing test's services did.
        let kept = std::env::var_os("CHIME_TEST_SERVICE_LOGS").is_some();
        let log = |suffix: &str| -> Result<std::process::Stdio> {
            let Some(dir) = std::env::var_os("CHIME_TEST_SERVICE_LOGS") else {
                return Ok(std::process::Stdio::null());
            };
            std::fs::create_dir_all(&dir)?;
            let service = args.first().copied().unwrap_or("chime").replace('/', "_");
            let name = format!("{service}-{}.{suffix}", Uuid::now_v7());
            Ok(std::fs::File::create(std::path::Path::new(&dir).join(name))?.into())
        };
        let mut command = self.chime_command(args)?;
        if kept {
            command.env("RUST_LOG", "info");
        }
        Ok(command
            .envs(envs.iter().copied())
            .env("CHIME_DB_POOL_SIZE", "4")
            .stdout(log("out")?)
            .stderr(log("err")?)
            .spawn()
            .inspect(|child| self.track(child))?)
    }

    /// Has [`TestEnv::cleanup`] kill `child` (if it still runs) before it deletes the
    /// installation's queues.
    pub fn track(&self, child: &tokio::process::Child) {
        let pidfd = child
            .id()
            .and_then(|pid| rustix::process::Pid::from_raw(i32::try_from(pid).ok()?))
            .map(|pid| rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()));
        match pidfd {
            Some(Ok(pidfd)) => self
                .children
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(pidfd),
            Some(Err(error)) => {
                eprintln!(
                    "cannot track a child process (pidfd_open: {error}); cleanup will not kill it"
                )
            }
            None => {}
        }
    }

    /// Kills every tracked process still running and waits (10 s at most in all) until each
    /// has exited, so none of its connections outlives this call.
    async fn kill_children(&mut self) {
        let children = std::mem::take(
            self.children
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for pidfd in &children {
            // Gone already (ESRCH) is as good as killed.
            let _ = rustix::process::pidfd_send_signal(pidfd, rustix::process::Signal::KILL);
        }
        let _ = tokio::task::spawn_blocking(move || {
            use rustix::event::{PollFd, PollFlags, Timespec, poll};
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            for pidfd in &children {
                // A pidfd turns readable once its process has exited. A signal (the runtime's
                // SIGCHLD handler) interrupts the wait without restarting it.
                loop {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    let within = Timespec {
                        tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                        tv_nsec: i64::from(left.subsec_nanos()),
                    };
                    match poll(&mut [PollFd::new(pidfd, PollFlags::IN)], Some(&within)) {
                        Err(rustix::io::Errno::INTR) if !left.is_zero() => continue,
                        _ => break,
                    }
                }
            }
        })
        .await;
    }

    /// `chime ARGS…` with this installation's settings in its environment and every pool at its
    /// role's default size, killed when dropped; the caller decides where its output goes.
    pub fn chime_command(&self, args: &[&str]) -> Result<tokio::process::Command> {
        let mut command = tokio::process::Command::new(chime_binary()?);
        command
            .args(args)
            .env("CHIME_DATABASE_URL", &self.settings.database_url)
            .env("CHIME_AMQP_URL", &self.settings.amqp_url)
            .env("CHIME_PREFIX", &self.settings.prefix)
            .env("CHIME_CONFIG", "/nonexistent/chime.toml")
            .env("CHIME_WORKER__ALLOW_OPEN_STORE", "true")
            .env("RUST_LOG", "warn")
            .env_remove("DATABASE_URL")
            .env_remove("CHIME_DB_POOL_SIZE")
            .kill_on_drop(true);
        Ok(command)
    }

    /// Stops the services and removes the test's database, queues and exchanges.
    pub async fn cleanup(mut self) -> Result<()> {
        self.stop().await?;
        // A process of this installation still running would declare its queues again as soon
        // as they are deleted (its consumers are cancelled, and it recovers), and leave them on
        // the shared broker when it is killed at the end of the test.
        self.kill_children().await;
        // Every group's queues, also those of groups the test created: quorum queues left on
        // the shared broker cost it memory and CPU for every later test and benchmark.
        let mut groups: Vec<String> = sqlx::query_scalar("SELECT name FROM worker_groups")
            .fetch_all(self.store.pool())
            .await
            .unwrap_or_default();
        groups.extend(self.settings.worker.groups.iter().cloned());
        groups.sort();
        groups.dedup();
        self.store.close().await;
        let topology = chime_core::bus::Topology::new(self.settings.prefix.clone());
        let conn = self.amqp().await?;
        let channel = conn.create_channel().await?;
        topology.remove(&channel, &groups).await;
        let _ = conn.close(200, "done".into()).await;
        let admin = sqlx::PgPool::connect(&format!("{}/postgres", self.pg_server)).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
            self.database
        )))
        .execute(&admin)
        .await?;
        admin.close().await;
        Ok(())
    }
}

/// A fresh directory for files a test's tasks write. Open to every user: on a root worker a
/// task runs as an unprivileged user (`worker.default_user`), which must be able to write here.
pub fn scratch_dir(what: &str) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("chime-{what}-{}", Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))?;
    Ok(dir)
}

/// How many messages wait in `queue`, not yet delivered (a passive declaration: an error if the
/// queue does not exist).
pub async fn queue_depth(channel: &lapin::Channel, queue: &str) -> Result<u32> {
    let declared = channel
        .queue_declare(
            queue.into(),
            lapin::options::QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await?;
    Ok(declared.message_count())
}

/// How many messages wait in an installation's dead-letter queue (on the shared broker).
pub async fn dead_letters(topology: &chime_core::bus::Topology) -> Result<i64> {
    dead_letters_at(&server_urls().1, topology).await
}

/// How many messages wait in an installation's dead-letter queue on the broker at `amqp_url`.
pub async fn dead_letters_at(amqp_url: &str, topology: &chime_core::bus::Topology) -> Result<i64> {
    let conn = lapin::Connection::connect(amqp_url, lapin::ConnectionProperties::default()).await?;
    let channel = conn.create_channel().await?;
    let dead = queue_depth(&channel, &topology.dead_exchange()).await?;
    let _ = conn.close(200, "done".into()).await;
    Ok(i64::from(dead))
}

/// Takes every message out of the dead-letter queue of the installation at `amqp_url` and
/// returns their bodies, in the queue's order.
pub async fn dead_letter_bodies_at(
    amqp_url: &str,
    topology: &chime_core::bus::Topology,
) -> Result<Vec<Vec<u8>>> {
    let conn = lapin::Connection::connect(amqp_url, lapin::ConnectionProperties::default()).await?;
    let channel = conn.create_channel().await?;
    let mut bodies = Vec::new();
    while let Some(message) = channel
        .basic_get(
            topology.dead_exchange().into(),
            lapin::options::BasicGetOptions { no_ack: true },
        )
        .await?
    {
        bodies.push(message.delivery.data);
    }
    let _ = conn.close(200, "done".into()).await;
    Ok(bodies)
}

/// Takes every message out of an installation's dead-letter queue and returns their reasons
/// (`x-chime-reason`).
pub async fn dead_letter_reasons(topology: &chime_core::bus::Topology) -> Result<Vec<String>> {
    let conn = lapin::Connection::connect(&server_urls().1, lapin::ConnectionProperties::default())
        .await?;
    let channel = conn.create_channel().await?;
    let mut reasons = Vec::new();
    loop {
        let got = channel
            .basic_get(
                topology.dead_exchange().into(),
                lapin::options::BasicGetOptions { no_ack: true },
            )
            .await?;
        let Some(message) = got else {
            break;
        };
        let headers = message
            .delivery
            .properties
            .headers()
            .clone()
            .unwrap_or_default();
        reasons.push(match headers.inner().get("x-chime-reason") {
            Some(lapin::types::AMQPValue::LongString(s)) => s.to_string(),
            other => format!("no reason header: {other:?}"),
        });
    }
    let _ = conn.close(200, "done".into()).await;
    Ok(reasons)
}

/// Waits (up to a minute) until at least `n` messages were dead-lettered, taking them out of the
/// queue, and returns their reasons.
pub async fn wait_dead_letters(
    topology: &chime_core::bus::Topology,
    n: usize,
) -> Result<Vec<String>> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut reasons = Vec::new();
    while reasons.len() < n {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {n} dead letters (got {reasons:?})"
        );
        reasons.extend(dead_letter_reasons(topology).await?);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(reasons)
}

/// The `chime-e2e` binary cargo built beside the test executable (`target/<profile>/`).
pub fn chime_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_chime-e2e") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .context("the test executable is not under target/<profile>/deps")?;
    Ok(profile_dir.join("chime-e2e"))
}

/// Waits (polling) until `check` holds, for up to 60 s: generous, so slow machines pass.
pub async fn eventually<F, Fut>(what: &str, check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    eventually_within(what, Duration::from_secs(60), check).await
}

/// [`eventually`], for up to `limit`: for a test whose condition takes a load's time.
pub async fn eventually_within<F, Fut>(what: &str, limit: Duration, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    let mut last_error = None;
    loop {
        match check().await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(error) => last_error = Some(error),
        }
        if tokio::time::Instant::now() > deadline {
            match last_error {
                Some(error) => bail!("timed out waiting for {what}; last error: {error:#}"),
                None => bail!("timed out waiting for {what}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn reqwest_get_status(url: &str) -> Result<u16> {
    Ok(http().get(url).send().await?.status().as_u16())
}

/// An HTTP client for calling the API directly.
pub fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// kill -9 of a spawned `chime`, then waits for it to be gone.
pub async fn kill9(child: &mut tokio::process::Child) -> Result<()> {
    let pid = child.id().context("the process had exited already")?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid)?),
        nix::sys::signal::Signal::SIGKILL,
    )?;
    child.wait().await?;
    Ok(())
}

/// A free TCP port on the loopback interface.
pub fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// The last non-empty line of a command's stdout.
pub fn last_line(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}
