//! The chaos suite's installation: a private PostgreSQL it may stop, a TCP proxy to RabbitMQ it
//! may cut, and every chime service as a process of its own (this same binary, run as `chime`),
//! each of which it may kill and starts again.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};
use chime_core::Store;
use chime_tests::postgres::PrivatePostgres;
use chime_tests::proxy::Proxy;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::Child;

/// The variable that makes this binary run as `chime` (the services it starts).
pub const AS_CHIME: &str = "CHAOS_AS_CHIME";

/// One service process and how to start it again.
struct Service {
    name: String,
    args: Vec<String>,
    child: Option<Child>,
}

/// Everything the run owns.
pub struct Cluster {
    /// The private PostgreSQL.
    pub pg: PrivatePostgres,
    /// The services' way to RabbitMQ.
    pub proxy: Proxy,
    /// A store on the run's database (the suite's own view).
    pub store: Store,
    /// The AMQP prefix.
    pub prefix: String,
    /// The API's base URL.
    pub api_url: String,
    /// The run's directory (logs, side-effect log).
    pub dir: PathBuf,
    database_url: String,
    services: Vec<Service>,
}

impl Cluster {
    /// Starts PostgreSQL, the proxy and the services.
    pub async fn start(dir: &Path) -> Result<Self> {
        let pg = PrivatePostgres::start()
            .await
            .context("starting PostgreSQL")?;
        let proxy = Proxy::start(&chime_tests::broker_address()).await?;
        let database_url = format!("{}/chaos", pg.url());
        let store = Store::connect(&database_url, 8)
            .await
            .context("creating the run's database")?;
        let id = uuid::Uuid::now_v7().simple().to_string();
        let prefix = format!("chaos{}", &id[id.len() - 8..]);
        let api_port = chime_tests::free_port()?;
        let mut services = Vec::new();
        let mut add = |name: &str, args: &[&str]| {
            services.push(Service {
                name: name.to_string(),
                args: args.iter().map(|a| a.to_string()).collect(),
                child: None,
            })
        };
        let api_addr = format!("127.0.0.1:{api_port}");
        add("api", &["api", "--api-addr", &api_addr]);
        for n in 1..=3 {
            add(&format!("scheduler-{n}"), &["scheduler"]);
        }
        for (n, group) in [(1, "default"), (2, "default"), (3, "etl"), (4, "etl")] {
            add(
                &format!("worker-{n}"),
                &["worker", "--groups", group, "--concurrency", "8"],
            );
        }
        for n in 1..=2 {
            add(&format!("dependency-{n}"), &["dependency"]);
        }
        let mut cluster = Self {
            pg,
            proxy,
            store,
            prefix,
            api_url: format!("http://{api_addr}"),
            dir: dir.to_path_buf(),
            database_url,
            services,
        };
        for i in 0..cluster.services.len() {
            cluster.spawn(i)?;
        }
        Ok(cluster)
    }

    /// The settings' AMQP URL for the services (through the proxy).
    fn amqp_url(&self) -> String {
        chime_tests::amqp_url_at(self.proxy.port())
    }

    /// How many service processes there are.
    pub fn len(&self) -> usize {
        self.services.len()
    }

    /// A service's name.
    pub fn name(&self, i: usize) -> &str {
        &self.services[i].name
    }

    fn spawn(&mut self, i: usize) -> Result<()> {
        let service = &self.services[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{}.log", service.name)))?;
        let child = tokio::process::Command::new(std::env::current_exe()?)
            .args(&service.args)
            .env(AS_CHIME, "1")
            .env("CHIME_DATABASE_URL", &self.database_url)
            .env("CHIME_AMQP_URL", self.amqp_url())
            .env("CHIME_PREFIX", &self.prefix)
            .env("CHIME_CONFIG", "/nonexistent/chime.toml")
            .env("CHIME_DB_POOL_SIZE", "6")
            .env("CHIME_SCHEDULER__REPUBLISH_AFTER_MS", "15000")
            .env("CHIME_WORKER__SHUTDOWN_GRACE_MS", "5000")
            // Its own PostgreSQL trusts loopback, and the broker has guest: a throwaway machine.
            .env("CHIME_WORKER__ALLOW_OPEN_STORE", "true")
            .env("RUST_LOG", "warn,lapin=off")
            .env_remove("DATABASE_URL")
            .env_remove("CHIME_API_TOKEN")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", service.name))?;
        self.services[i].child = Some(child);
        Ok(())
    }

    /// kill -9 of service `i`, then starts it again after `pause`.
    pub async fn kill9(&mut self, i: usize, pause: Duration) -> Result<()> {
        if let Some(mut child) = self.services[i].child.take() {
            let _ = child.kill().await;
        }
        tokio::time::sleep(pause).await;
        self.spawn(i)
    }

    /// SIGTERM of service `i`: waits for it to stop (kill -9 after 20 s), starts it again.
    pub async fn terminate(&mut self, i: usize) -> Result<()> {
        if let Some(mut child) = self.services[i].child.take() {
            if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            }
            if tokio::time::timeout(Duration::from_secs(20), child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
        }
        self.spawn(i)
    }

    /// Starts again every service that exited by itself.
    pub fn revive(&mut self) -> Result<Vec<String>> {
        let mut revived = Vec::new();
        for i in 0..self.services.len() {
            let exited = match self.services[i].child.as_mut() {
                Some(child) => child.try_wait()?.is_some(),
                None => true,
            };
            if exited {
                revived.push(self.services[i].name.clone());
                self.spawn(i)?;
            }
        }
        Ok(revived)
    }

    /// Stops every service (SIGTERM, then kill after 20 s).
    pub async fn stop_services(&mut self) {
        for service in &mut self.services {
            if let Some(child) = &service.child
                && let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok())
            {
                let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            }
        }
        for service in &mut self.services {
            if let Some(mut child) = service.child.take()
                && tokio::time::timeout(Duration::from_secs(20), child.wait())
                    .await
                    .is_err()
            {
                let _ = child.kill().await;
            }
        }
    }

    /// Removes the run's queues and exchanges, and PostgreSQL.
    pub async fn destroy(mut self) {
        self.stop_services().await;
        self.store.close().await;
        let topology = chime_core::bus::Topology::new(self.prefix.clone());
        if let Ok(conn) = lapin::Connection::connect(
            &chime_tests::server_urls().1,
            lapin::ConnectionProperties::default(),
        )
        .await
        {
            if let Ok(channel) = conn.create_channel().await {
                topology
                    .remove(&channel, &["default".into(), "etl".into()])
                    .await;
            }
            let _ = conn.close(200, "done".into()).await;
        }
        self.pg.destroy().await;
    }
}
