//! The chaos suite's installation: a private PostgreSQL it may stop or crash, a private RabbitMQ
//! node it may kill and start again, and every chime
//! service as a process of its own (this same binary, run as `chime`), each reaching PostgreSQL
//! and RabbitMQ through proxies of its own, which the suite may cut, black-hole or slow down. It
//! may kill, terminate, freeze and thaw each process, and starts again what exited.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};
use chime_core::Store;
use chime_tests::postgres::PrivatePostgres;
use chime_tests::proxy::Proxy;
use chime_tests::rabbitmq::PrivateRabbitMq;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::Child;

/// The variable that makes this binary run as `chime` (the services it starts).
pub const AS_CHIME: &str = "CHAOS_AS_CHIME";

/// The workers: name, the group each consumes, its slots. Each group's load keeps 5–7 slots
/// busy (`workload.rs`), so that either of its two workers alone carries it: with one frozen or
/// killed, tasks still start on time (invariant 1g), and a backlog is a bug.
pub const WORKERS: [(&str, &str, u32); 4] = [
    ("worker-1", "default", 16),
    ("worker-2", "default", 16),
    ("worker-3", "etl", 16),
    ("worker-4", "etl", 16),
];

/// One service process and how to start it again.
struct Service {
    name: String,
    args: Vec<String>,
    child: Option<Child>,
    /// Its way to PostgreSQL.
    pg: Proxy,
    /// Its way to RabbitMQ.
    amqp: Proxy,
    /// Not started again before this (a kill -9 with a pause, or a start that failed just now).
    down_until: Option<std::time::Instant>,
}

/// A process that exits is started again no sooner than this after its last start (one that
/// cannot start while PostgreSQL is away would otherwise be started in a tight loop).
const RESTART_BACKOFF: Duration = Duration::from_secs(2);

/// Everything the run owns.
pub struct Cluster {
    /// The private PostgreSQL.
    pub pg: PrivatePostgres,
    /// The private RabbitMQ node.
    pub rabbit: PrivateRabbitMq,
    rabbit_password: String,
    /// A store on the run's database (the suite's own view).
    pub store: Store,
    /// The AMQP prefix.
    pub prefix: String,
    /// The API's base URL.
    pub api_url: String,
    /// The run's directory (logs, side-effect log).
    pub dir: PathBuf,
    /// The run's database on the private server.
    pub database: String,
    services: Vec<Service>,
}

impl Cluster {
    /// Starts PostgreSQL, the proxy and the services.
    pub async fn start(dir: &Path) -> Result<Self> {
        // It crashes it: commits must be as durable as in production.
        let pg = PrivatePostgres::start_durable()
            .await
            .context("starting PostgreSQL")?;
        let rabbit_password = uuid::Uuid::now_v7().simple().to_string();
        let rabbit = PrivateRabbitMq::start("chaos", &rabbit_password)
            .await
            .context("starting RabbitMQ")?;
        let database = "chaos".to_string();
        let database_url = format!("{}/{database}", pg.url());
        let store = Store::connect(&database_url, 8)
            .await
            .context("creating the run's database")?;
        let id = uuid::Uuid::now_v7().simple().to_string();
        let prefix = format!("chaos{}", &id[id.len() - 8..]);
        let api_port = chime_tests::free_port()?;
        let api_addr = format!("127.0.0.1:{api_port}");
        let mut wanted: Vec<(String, Vec<String>)> = Vec::new();
        let mut add = |name: &str, args: &[&str]| {
            wanted.push((
                name.to_string(),
                args.iter().map(|a| a.to_string()).collect(),
            ))
        };
        add("api", &["api", "--api-addr", &api_addr]);
        for n in 1..=3 {
            add(&format!("scheduler-{n}"), &["scheduler"]);
        }
        for (name, group, slots) in WORKERS {
            add(
                name,
                &[
                    "worker",
                    "--groups",
                    group,
                    "--concurrency",
                    &slots.to_string(),
                ],
            );
        }
        for n in 1..=2 {
            add(&format!("dependency-{n}"), &["dependency"]);
        }
        let mut services = Vec::new();
        for (name, args) in wanted {
            services.push(Service {
                name,
                args,
                child: None,
                pg: Proxy::start(&format!("127.0.0.1:{}", pg.port())).await?,
                amqp: Proxy::start(&format!("127.0.0.1:{}", rabbit.port())).await?,
                down_until: None,
            });
        }
        let mut cluster = Self {
            pg,
            rabbit,
            rabbit_password,
            store,
            prefix,
            api_url: format!("http://{api_addr}"),
            dir: dir.to_path_buf(),
            database,
            services,
        };
        for i in 0..cluster.services.len() {
            cluster.spawn(i)?;
        }
        Ok(cluster)
    }

    /// How many service processes there are.
    pub fn len(&self) -> usize {
        self.services.len()
    }

    /// A service's name.
    pub fn name(&self, i: usize) -> &str {
        &self.services[i].name
    }

    /// A service's process id, while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.services[i].child.as_ref().and_then(|c| c.id())
    }

    /// The indexes of the services whose name starts with `kind` (scheduler, worker, …).
    pub fn of_kind(&self, kind: &str) -> Vec<usize> {
        (0..self.services.len())
            .filter(|i| self.services[*i].name.starts_with(kind))
            .collect()
    }

    /// Cuts service `i` off from PostgreSQL (packets dropped), or from RabbitMQ.
    pub fn partition(&self, i: usize, from_postgres: bool) {
        let service = &self.services[i];
        if from_postgres {
            service.pg.blackhole();
        } else {
            service.amqp.blackhole();
        }
    }

    /// Ends a partition of service `i` (both ways).
    pub fn heal(&self, i: usize) {
        self.services[i].pg.restore();
        self.services[i].amqp.restore();
    }

    /// Closes every connection to RabbitMQ and refuses new ones, or (`false`) lets them in again.
    pub fn cut_broker(&self, cut: bool) {
        for service in &self.services {
            if cut {
                service.amqp.cut();
            } else {
                service.amqp.restore();
            }
        }
    }

    /// Slows every process's PostgreSQL traffic by `by` each way, or (None) no longer.
    pub fn slow_postgres(&self, by: Option<Duration>) {
        for service in &self.services {
            match by {
                Some(by) => service.pg.delay(by),
                None => service.pg.restore(),
            }
        }
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) service `i`'s process.
    pub fn freeze(&self, i: usize, frozen: bool) {
        if let Some(pid) = self.pid(i).and_then(|p| i32::try_from(p).ok()) {
            let signal = if frozen {
                Signal::SIGSTOP
            } else {
                Signal::SIGCONT
            };
            let _ = kill(Pid::from_raw(pid), signal);
        }
    }

    /// Refuses service `i`'s connections to PostgreSQL (open ones closed, new ones refused)
    /// while PostgreSQL serves everyone else; [`Cluster::heal`] ends it.
    pub fn refuse_postgres(&self, i: usize) {
        self.services[i].pg.refuse();
    }

    /// The processes of service `i`'s tree: itself, every process below it (a worker's
    /// commands), and a worker's guard, which is detached from it and found by the pipe only the
    /// two of them hold.
    pub fn tree(&self, i: usize) -> Vec<u32> {
        let Some(root) = self.pid(i) else {
            return Vec::new();
        };
        let mut tree = vec![root];
        let parents = parents();
        let mut at = 0;
        while at < tree.len() {
            let parent = tree[at];
            tree.extend(
                parents
                    .iter()
                    .filter(|(_, p)| *p == parent)
                    .map(|(pid, _)| *pid),
            );
            at += 1;
        }
        if let Some(guard) = self.guard(i) {
            tree.push(guard);
        }
        tree
    }

    /// A worker's guard: the process, running the same program and none of the services, that
    /// holds a pipe of the worker's which nobody else does. Pipes the harness handed every
    /// service (cargo's jobserver, inherited) are left out: through one of those, a worker with
    /// the same command line looked like another's guard, and was killed in its place.
    pub fn guard(&self, i: usize) -> Option<u32> {
        let worker = self.pid(i)?;
        let cmdline = std::fs::read(format!("/proc/{worker}/cmdline")).ok()?;
        let services: Vec<u32> = (0..self.len()).filter_map(|s| self.pid(s)).collect();
        let inherited = pipes_of(std::process::id());
        let pipes: Vec<String> = pipes_of(worker)
            .into_iter()
            .filter(|p| !inherited.contains(p))
            .collect();
        if pipes.is_empty() {
            return None;
        }
        let holders: Vec<u32> = parents()
            .into_iter()
            .map(|(pid, _)| pid)
            .filter(|pid| *pid != worker && !services.contains(pid))
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == cmdline)
                    && pipes_of(*pid).iter().any(|p| pipes.contains(p))
            })
            .collect();
        // Exactly one, or none: never a guess.
        match holders[..] {
            [guard] => Some(guard),
            _ => None,
        }
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) the processes `pids`, in that order.
    pub fn freeze_pids(pids: &[u32], frozen: bool) {
        let signal = if frozen {
            Signal::SIGSTOP
        } else {
            Signal::SIGCONT
        };
        for pid in pids {
            if let Ok(pid) = i32::try_from(*pid) {
                let _ = kill(Pid::from_raw(pid), signal);
            }
        }
    }

    fn spawn(&mut self, i: usize) -> Result<()> {
        let service = &self.services[i];
        let database_url = format!(
            "postgres://postgres@127.0.0.1:{}/{}",
            service.pg.port(),
            self.database
        );
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{}.log", service.name)))?;
        let child = tokio::process::Command::new(std::env::current_exe()?)
            .args(&service.args)
            .env(AS_CHIME, "1")
            .env("CHIME_DATABASE_URL", &database_url)
            .env(
                "CHIME_AMQP_URL",
                format!(
                    "amqp://chaos:{}@127.0.0.1:{}/%2f",
                    self.rabbit_password,
                    service.amqp.port()
                ),
            )
            .env("CHIME_PREFIX", &self.prefix)
            .env("CHIME_CONFIG", "/nonexistent/chime.toml")
            .env("CHIME_DB_POOL_SIZE", "6")
            .env("CHIME_SCHEDULER__REPUBLISH_AFTER_MS", "15000")
            .env("CHIME_WORKER__SHUTDOWN_GRACE_MS", "5000")
            // Its own PostgreSQL trusts loopback: a throwaway installation.
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
        self.services[i].down_until = Some(std::time::Instant::now() + RESTART_BACKOFF);
        Ok(())
    }

    /// kill -9 of service `i`; [`Cluster::revive`] starts it again once `pause` has passed.
    pub async fn kill9(&mut self, i: usize, pause: Duration) {
        if let Some(mut child) = self.services[i].child.take() {
            let _ = child.kill().await;
        }
        self.services[i].down_until = Some(std::time::Instant::now() + pause);
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

    /// Starts again every service that exited (by itself, or killed and its pause over).
    pub fn revive(&mut self) -> Result<Vec<String>> {
        let mut revived = Vec::new();
        for i in 0..self.services.len() {
            if self.services[i]
                .down_until
                .is_some_and(|until| std::time::Instant::now() < until)
            {
                continue;
            }
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
        for service in &self.services {
            service.pg.restore();
            service.amqp.restore();
        }
        for i in 0..self.services.len() {
            self.freeze(i, false);
        }
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

    /// The harness's own way to RabbitMQ (no proxy).
    pub fn amqp_url(&self) -> String {
        self.rabbit.url()
    }

    /// Stops the services, RabbitMQ and PostgreSQL, and removes their directories.
    pub async fn destroy(mut self) {
        self.stop_services().await;
        self.store.close().await;
        self.rabbit.destroy().await;
        self.pg.destroy().await;
    }
}

/// Every process on the machine with its parent.
fn parents() -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // The command's name, in parentheses, may hold anything: the fields follow its end.
            let after = &stat[stat.rfind(')')? + 1..];
            let parent = after.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, parent))
        })
        .collect()
}

/// The pipes a process holds open (their inode numbers).
fn pipes_of(pid: u32) -> Vec<String> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_str()?;
            target.starts_with("pipe:").then(|| target.to_string())
        })
        .collect()
}
