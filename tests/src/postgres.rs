//! A private PostgreSQL server a test (or the chaos suite) owns, so it may stop, restart and cut
//! it without touching the shared one: `initdb` into a temporary directory with the machine's
//! PostgreSQL binaries, on a free port, trust authentication (or, with
//! [`PrivatePostgres::start_with_password`], passwords for everyone, as a locked-down install has). As root the server runs as the
//! `postgres` user (PostgreSQL refuses to run as root).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// A PostgreSQL server in a directory of its own.
pub struct PrivatePostgres {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    password: Option<String>,
}

impl PrivatePostgres {
    /// Creates and starts a server on a free port.
    pub async fn start() -> Result<Self> {
        Self::start_with(None, false, 300).await
    }

    /// Like [`PrivatePostgres::start`], allowing `max_connections` sessions (PostgreSQL's
    /// default is 100, three of them kept for superusers).
    pub async fn start_with_max_connections(max_connections: u32) -> Result<Self> {
        Self::start_with(None, false, max_connections).await
    }

    /// Like [`PrivatePostgres::start`], with every commit flushed before it is acknowledged, as
    /// a production server has it: a crash (`crash`, `kill_postmaster`) loses nothing committed.
    /// (The others trade that for speed, and are only ever stopped cleanly.)
    pub async fn start_durable() -> Result<Self> {
        Self::start_with(None, true, 300).await
    }

    /// Like [`PrivatePostgres::start`], but every connection, local or TCP, needs a password
    /// (`scram-sha-256`); the superuser `postgres` has `password`.
    pub async fn start_with_password(password: &str) -> Result<Self> {
        Self::start_with(Some(password.to_string()), false, 300).await
    }

    async fn start_with(
        password: Option<String>,
        durable: bool,
        max_connections: u32,
    ) -> Result<Self> {
        let server = Self {
            dir: server_dir().await?,
            bin: binaries()?,
            port: port_outside_ephemeral_range()?,
            password,
        };
        let pwfile = server.dir.join("pwfile");
        let auth = match &server.password {
            Some(password) => {
                std::fs::write(&pwfile, password)?;
                format!("--auth=scram-sha-256 --pwfile={}", path_str(&pwfile)?)
            }
            None => "--auth=trust".to_string(),
        };
        let data = server.data_dir();
        let auth: Vec<&str> = auth.split(' ').collect();
        server
            .run(
                "initdb",
                &[
                    auth.as_slice(),
                    &[
                        "-D",
                        path_str(&data)?,
                        "-U",
                        "postgres",
                        "--no-sync",
                        "-E",
                        "UTF8",
                    ],
                ]
                .concat(),
            )
            .await
            .context("initdb")?;
        let _ = std::fs::remove_file(&pwfile);
        let durability = if durable {
            ""
        } else {
            "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
        };
        let conf = format!(
            "port = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             {durability}max_connections = {max_connections}\n",
            server.port,
            path_str(&server.dir)?
        );
        append_conf(&data, &conf)?;
        server.resume().await?;
        Ok(server)
    }

    /// A hot standby of this server (trust authentication only): `pg_basebackup -R` from it
    /// into a directory of its own, on a port of its own, streaming from it and read-only until
    /// [`PrivatePostgres::promote`], as a failover manager keeps one.
    pub async fn start_standby(&self) -> Result<Self> {
        anyhow::ensure!(
            self.password.is_none(),
            "a standby of a server with passwords"
        );
        let standby = Self {
            dir: server_dir().await?,
            bin: self.bin.clone(),
            port: port_outside_ephemeral_range()?,
            password: None,
        };
        let data = standby.data_dir();
        let primary_port = self.port.to_string();
        standby
            .run(
                "pg_basebackup",
                &[
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &primary_port,
                    "-U",
                    "postgres",
                    "-D",
                    path_str(&data)?,
                    "-R",
                    "-X",
                    "stream",
                    "--no-sync",
                ],
            )
            .await
            .context("pg_basebackup")?;
        // The copy carries the primary's settings; the last line of a setting wins.
        let conf = format!(
            "port = {}\nunix_socket_directories = '{}'\nhot_standby = on\n",
            standby.port,
            path_str(&standby.dir)?
        );
        append_conf(&data, &conf)?;
        standby.resume().await?;
        Ok(standby)
    }

    /// Promotes a standby to a primary and waits until it accepts writes.
    pub async fn promote(&self) -> Result<()> {
        let data = self.data_dir();
        self.run("pg_ctl", &["-D", path_str(&data)?, "-w", "promote"])
            .await
            .context("pg_ctl promote")
    }

    /// `postgres://postgres[:password]@127.0.0.1:PORT` (append `/database`).
    pub fn url(&self) -> String {
        match &self.password {
            Some(password) => format!("postgres://postgres:{password}@127.0.0.1:{}", self.port),
            None => format!("postgres://postgres@127.0.0.1:{}", self.port),
        }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Writes database `database` to `to` with `pg_dump` (custom format: `pg_restore` reads it).
    pub async fn dump(&self, database: &str, to: &Path) -> Result<()> {
        let out = tokio::process::Command::new(binaries()?.join("pg_dump"))
            .arg(format!("--dbname={}/{database}", self.url()))
            .args(["--format=custom", "--file"])
            .arg(to)
            .output()
            .await
            .context("pg_dump")?;
        anyhow::ensure!(
            out.status.success(),
            "pg_dump: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    }

    /// What the server has logged so far.
    pub fn log(&self) -> Result<String> {
        Ok(std::fs::read_to_string(self.dir.join("server.log"))?)
    }

    /// Stops the server (fast shutdown: sessions are cut, as in a crash of the clients' view).
    pub async fn stop(&self) -> Result<()> {
        let data = self.data_dir();
        self.run(
            "pg_ctl",
            &["-D", path_str(&data)?, "-m", "fast", "-w", "stop"],
        )
        .await
        .context("pg_ctl stop")
    }

    /// Stops the server as a crash would (`-m immediate`: no checkpoint, crash recovery on the
    /// next start, which empties every `UNLOGGED` table).
    pub async fn crash(&self) -> Result<()> {
        let data = self.data_dir();
        self.run(
            "pg_ctl",
            &["-D", path_str(&data)?, "-m", "immediate", "-w", "stop"],
        )
        .await
        .context("pg_ctl stop -m immediate")
    }

    /// kill -9 of the postmaster. Its backends notice and exit; `resume` waits until the server
    /// can start again (crash recovery follows).
    pub async fn kill_postmaster(&self) -> Result<()> {
        let pid = std::fs::read_to_string(self.data_dir().join("postmaster.pid"))
            .context("reading postmaster.pid")?
            .lines()
            .next()
            .and_then(|l| l.trim().parse::<i32>().ok())
            .context("no pid in postmaster.pid")?;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .context("kill -9 of the postmaster")?;
        Ok(())
    }

    /// Starts the server again and waits until it accepts connections.
    pub async fn resume(&self) -> Result<()> {
        let mut tries = 0;
        loop {
            match self.start_once().await {
                Ok(()) => return Ok(()),
                // After a kill -9 the old backends may hold the shared memory a moment longer.
                Err(_) if tries < 20 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    async fn start_once(&self) -> Result<()> {
        let data = self.data_dir();
        let log = self.dir.join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                path_str(&data)?,
                "-l",
                path_str(&log)?,
                "-w",
                "-t",
                "60",
                "start",
            ],
        )
        .await
        .context("pg_ctl start")
    }

    /// Stops the server and removes its directory.
    pub async fn destroy(self) {
        let _ = self.stop().await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    async fn run(&self, program: &str, args: &[&str]) -> Result<()> {
        let program = self.bin.join(program);
        let mut command = if is_root() {
            let mut command = tokio::process::Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(&program);
            command
        } else {
            tokio::process::Command::new(&program)
        };
        let out = tokio::time::timeout(
            Duration::from_secs(90),
            command
                .args(args)
                .current_dir(&self.dir)
                .stdin(Stdio::null())
                .output(),
        )
        .await
        .with_context(|| format!("{} timed out", program.display()))??;
        if !out.status.success() {
            bail!(
                "{} failed: {}{}",
                program.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}

/// A new directory for a server, which the server's user owns (`postgres` when run as root).
async fn server_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("chime-pg-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir)?;
    if is_root() {
        let status = tokio::process::Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status()
            .await?;
        anyhow::ensure!(status.success(), "chown of {} failed", dir.display());
    }
    Ok(dir)
}

/// Appends settings to a data directory's `postgresql.conf` (the last line of a setting wins).
fn append_conf(data: &Path, conf: &str) -> Result<()> {
    std::fs::OpenOptions::new()
        .append(true)
        .open(data.join("postgresql.conf"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, conf.as_bytes()))?;
    Ok(())
}

/// The newest installed PostgreSQL's `bin` directory (Debian's layout), or `pg_config --bindir`.
fn binaries() -> Result<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dir| {
            dir.filter_map(|e| e.ok().map(|e| e.path().join("bin")))
                .filter(|p| p.join("initdb").exists())
                .collect()
        })
        .unwrap_or_default();
    versions.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    if let Some(bin) = versions.pop() {
        return Ok(bin);
    }
    let out = std::process::Command::new("pg_config")
        .arg("--bindir")
        .output()
        .context("no PostgreSQL binaries under /usr/lib/postgresql, and no pg_config")?;
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// A free port below Linux's ephemeral range (32768 and up), where other tests pick theirs by
/// binding port 0: a port chosen there could be taken by a test's API between its choice and
/// PostgreSQL's bind.
fn port_outside_ephemeral_range() -> Result<u16> {
    let seed = uuid::Uuid::now_v7().as_u64_pair().1;
    for n in 0..200u64 {
        let port = 15_000 + ((seed.wrapping_add(n * 7919)) % 15_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no free port between 15000 and 30000")
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn path_str(path: &Path) -> Result<&str> {
    path.to_str().context("a non-UTF-8 temporary path")
}
