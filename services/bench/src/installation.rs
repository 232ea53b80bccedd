//! A throw-away installation for a benchmark: its own database (dropped and recreated) and AMQP
//! prefix, and the scheduler instances and workers it runs in this process.

use std::sync::Arc;
use std::time::Duration;

use chime_core::config::{Settings, WorkerSettings};
use chime_core::{Node, Store};
use chime_scheduler::SchedulerSettings;
use tokio_util::sync::CancellationToken;

/// The benchmark's result type: any failure ends it with its message.
pub type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A benchmark's database and scheduler instances.
pub struct Installation {
    /// A store on the benchmark's database.
    pub store: Store,
    settings: Settings,
    admin: sqlx::PgPool,
    database: String,
    nodes: Vec<Arc<Node>>,
    shutdown: CancellationToken,
}

impl Installation {
    /// Creates (or recreates) database `chime_bench_<name>`, migrated.
    pub async fn create(settings: &Settings, name: &str) -> BenchResult<Self> {
        let base = settings
            .database_url
            .rsplit_once('/')
            .map_or(settings.database_url.as_str(), |(server, _)| server);
        let database = format!("chime_bench_{name}");
        let admin = sqlx::PgPool::connect(&format!("{base}/postgres")).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {database} WITH (FORCE)"
        )))
        .execute(&admin)
        .await?;
        let settings = Settings {
            database_url: format!("{base}/{database}"),
            prefix: format!("chime-bench-{name}"),
            ..settings.clone()
        };
        let store = Store::connect(&settings.database_url, 8).await?;
        Ok(Self {
            store,
            settings,
            admin,
            database,
            nodes: Vec::new(),
            shutdown: CancellationToken::new(),
        })
    }

    /// Starts `count` scheduler instances, each on its own node (pool, broker, relay).
    pub async fn start_schedulers(&mut self, count: usize) -> BenchResult<()> {
        for _ in 0..count {
            let node = Arc::new(Node::start(self.settings.clone(), "scheduler").await?);
            let (n, stop) = (node.clone(), self.shutdown.clone());
            tokio::spawn(async move {
                let settings = SchedulerSettings::from_config(&n.settings.scheduler);
                let _ = chime_scheduler::run(&n, settings, stop).await;
            });
            self.nodes.push(node);
        }
        Ok(())
    }

    /// Starts `count` workers with `concurrency` slots each, each on its own node.
    pub async fn start_workers(&mut self, count: usize, concurrency: u16) -> BenchResult<()> {
        for _ in 0..count {
            // The worker's node is sized as a `chime worker` with these slots is.
            let mut settings = self.settings.clone();
            settings.worker.concurrency = concurrency;
            let node = Arc::new(Node::start(settings, "worker").await?);
            let (n, stop) = (node.clone(), self.shutdown.clone());
            // The benchmark's workers run its noop tasks only, on a throwaway installation.
            let worker = WorkerSettings {
                concurrency,
                allow_open_store: true,
                ..n.settings.worker.clone()
            };
            tokio::spawn(async move {
                let _ = chime_worker::run(&n, worker, stop).await;
            });
            self.nodes.push(node);
        }
        Ok(())
    }

    /// Starts `count` dependency services, each on its own node.
    pub async fn start_dependency_services(&mut self, count: usize) -> BenchResult<()> {
        for _ in 0..count {
            let node = Arc::new(Node::start(self.settings.clone(), "dependency").await?);
            let (n, stop) = (node.clone(), self.shutdown.clone());
            tokio::spawn(async move { chime_dependency::run(&n, stop).await });
            self.nodes.push(node);
        }
        Ok(())
    }

    /// The store of the first service started, to write through as a client of that service
    /// would (an API or a worker taking a submission): its relay publishes what is written at
    /// once, where the installation's own store has no relay and leaves it to the next poll.
    pub fn node_store(&self) -> Store {
        self.nodes
            .first()
            .map_or_else(|| self.store.clone(), |node| node.store.clone())
    }

    /// The installation's settings (its database and prefix).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Waits until `count` task messages are published (confirmed).
    pub async fn wait_published(&self, count: i64) -> BenchResult<()> {
        loop {
            let published: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM outbox
                 WHERE published_at IS NOT NULL AND exchange LIKE '%.tasks'",
            )
            .fetch_one(self.store.pool())
            .await?;
            if published >= count {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the instances and drops the database.
    pub async fn finish(self) -> BenchResult<()> {
        self.shutdown.cancel();
        tokio::time::sleep(Duration::from_millis(200)).await;
        for node in self.nodes {
            if let Ok(node) = Arc::try_unwrap(node) {
                node.stopped().await;
            }
        }
        self.store.close().await;
        // Its task messages were never meant to be consumed: remove them with their queues.
        let topology = chime_core::bus::Topology::new(self.settings.prefix.clone());
        let conn = lapin::Connection::connect(
            &self.settings.amqp_url,
            lapin::ConnectionProperties::default(),
        )
        .await?;
        topology
            .remove(&conn.create_channel().await?, &self.settings.worker.groups)
            .await;
        let _ = conn.close(200, "done".into()).await;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.database
        )))
        .execute(&self.admin)
        .await?;
        Ok(())
    }
}
