//! A private RabbitMQ node a test owns: started from the machine's RabbitMQ in a temporary
//! directory, on free ports, with one user of the test's choosing and no `guest`, as a
//! locked-down install has. Takes a few seconds to boot.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// A RabbitMQ node in a directory of its own.
pub struct PrivateRabbitMq {
    dir: PathBuf,
    port: u16,
    dist_port: u16,
    node_name: String,
    user: String,
    password: String,
    node: tokio::process::Child,
}

const SERVER: &str = "/usr/lib/rabbitmq/bin/rabbitmq-server";

impl PrivateRabbitMq {
    /// Starts a node whose only user is `user` (an administrator of `/`) with `password`.
    pub async fn start(user: &str, password: &str) -> Result<Self> {
        anyhow::ensure!(
            std::path::Path::new(SERVER).exists(),
            "no {SERVER}: RabbitMQ is not installed here"
        );
        let id = uuid::Uuid::now_v7().simple().to_string();
        let dir = std::env::temp_dir().join(format!("chime-rabbitmq-{id}"));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("enabled_plugins"), "[].\n")?;
        let node_name = format!("chime{}@localhost", &id[id.len() - 10..]);
        // A free port can be taken by another test's connection between the probe and the
        // node's bind (the node then stops with `dist_port_already_used`): try fresh ports.
        let mut tries = 0;
        loop {
            tries += 1;
            let (port, dist_port) = (free_port()?, free_port()?);
            match Self::start_on(&dir, port, dist_port, &node_name, user, password).await {
                Ok(broker) => return Ok(broker),
                Err(StartError::PortTaken(out)) if tries < 5 => {
                    eprintln!("the private RabbitMQ lost a port, trying others: {out}");
                    let _ = std::fs::remove_dir_all(dir.join("mnesia"));
                    // The failed node's pid may be reused by now: never signal it again.
                    let _ = std::fs::remove_file(dir.join("pid"));
                }
                Err(StartError::PortTaken(out)) | Err(StartError::Other(out)) => bail!(out),
            }
        }
    }

    async fn start_on(
        dir: &std::path::Path,
        port: u16,
        dist_port: u16,
        node_name: &str,
        user: &str,
        password: &str,
    ) -> std::result::Result<Self, StartError> {
        let other = |e: anyhow::Error| StartError::Other(format!("{e:#}"));
        std::fs::write(
            dir.join("rabbitmq.conf"),
            format!(
                "listeners.tcp.default = 127.0.0.1:{port}\ndefault_user = {user}\n\
                 default_pass = {password}\n"
            ),
        )
        .map_err(|e| other(e.into()))?;
        if nix::unistd::geteuid().is_root() {
            let status = tokio::process::Command::new("chown")
                .args(["-R", "rabbitmq"])
                .arg(dir)
                .status()
                .await
                .map_err(|e| other(e.into()))?;
            if !status.success() {
                return Err(StartError::Other(format!(
                    "chown of {} failed",
                    dir.display()
                )));
            }
        }
        let node = launch(dir, port, dist_port, node_name).map_err(other)?;
        let mut broker = Self {
            dir: dir.to_path_buf(),
            port,
            dist_port,
            node_name: node_name.to_string(),
            user: user.to_string(),
            password: password.to_string(),
            node,
        };
        match broker.wait_ready().await {
            Ok(()) => Ok(broker),
            Err(e) => {
                broker.kill().await;
                let message = format!("{e:#}");
                if message.contains("port_already_used") || message.contains("eaddrinuse") {
                    Err(StartError::PortTaken(message))
                } else {
                    Err(StartError::Other(message))
                }
            }
        }
    }

    /// Kills the node (-9, as a crash would) and starts it again on its own data: durable
    /// queues and their messages come back. Waits until it accepts connections.
    pub async fn restart(&mut self) -> Result<()> {
        self.kill().await;
        self.node = launch(&self.dir, self.port, self.dist_port, &self.node_name)?;
        self.wait_ready().await
    }

    async fn kill(&mut self) {
        let pid = std::fs::read_to_string(self.dir.join("pid"))
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok());
        if let Some(pid) = pid {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.node.kill().await;
        // The Erlang port mapper keeps the node's name until the old node's socket is gone.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            if let Ok(Some(status)) = self.node.try_wait() {
                let out = std::fs::read_to_string(self.dir.join("out")).unwrap_or_default();
                bail!("the private RabbitMQ stopped ({status}) while starting: {out}");
            }
            // A node still starting may take the connection and never answer the handshake:
            // each try is bounded, or the wait would never end.
            let connected = tokio::time::timeout(
                Duration::from_secs(5),
                lapin::Connection::connect(&self.url(), lapin::ConnectionProperties::default()),
            )
            .await;
            if let Ok(Ok(conn)) = connected {
                let _ = conn.close(200, "up".into()).await;
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                let out = std::fs::read_to_string(self.dir.join("out")).unwrap_or_default();
                bail!("the private RabbitMQ did not start within 90 s: {out}");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// `amqp://user:password@127.0.0.1:PORT/%2f`.
    pub fn url(&self) -> String {
        format!(
            "amqp://{}:{}@127.0.0.1:{}/%2f",
            self.user, self.password, self.port
        )
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the node and removes its directory.
    pub async fn destroy(mut self) {
        self.kill().await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Why a node did not start: a port taken under it is worth another try.
enum StartError {
    PortTaken(String),
    Other(String),
}

/// Starts the node's server process on its directory.
fn launch(
    dir: &std::path::Path,
    port: u16,
    dist_port: u16,
    node_name: &str,
) -> Result<tokio::process::Child> {
    let mut command = if nix::unistd::geteuid().is_root() {
        let mut command = tokio::process::Command::new("runuser");
        command.args(["-u", "rabbitmq", "--", SERVER]);
        command
    } else {
        tokio::process::Command::new(SERVER)
    };
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    Ok(command
        .current_dir(dir)
        .env("RABBITMQ_NODENAME", node_name)
        .env("RABBITMQ_NODE_PORT", port.to_string())
        .env("RABBITMQ_DIST_PORT", dist_port.to_string())
        .env("RABBITMQ_MNESIA_BASE", path("mnesia"))
        .env("RABBITMQ_LOG_BASE", path("log"))
        .env("RABBITMQ_CONFIG_FILE", path("rabbitmq"))
        .env("RABBITMQ_ENABLED_PLUGINS_FILE", path("enabled_plugins"))
        .env("RABBITMQ_PID_FILE", path("pid"))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("out"))?)
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?)
}

fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("a free port")?;
    Ok(listener.local_addr()?.port())
}
