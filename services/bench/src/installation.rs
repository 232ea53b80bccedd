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

    /// Starts `count` workers with `concurrency` slots each (process and inline alike), each on
    /// its own node.
    pub async fn start_workers(&mut self, count: usize, concurrency: u16) -> BenchResult<()> {
        for _ in 0..count {
            // The worker's node is sized as a `chime worker` with these slots is.
            let mut settings = self.settings.clone();
            settings.worker.concurrency = concurrency;
            settings.worker.inline_concurrency = concurrency;
            let node = Arc::new(Node::start(settings, "worker").await?);
            let (n, stop) = (node.clone(), self.shutdown.clone());
            // The benchmark's workers run its noop tasks only, on a throwaway installation.
            let worker = WorkerSettings {
                concurrency,
                inline_concurrency: concurrency,
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

    /// Stops the instances (their sessions end, so PostgreSQL's statistics hold all they did).
    pub async fn stop(&mut self) {
        self.shutdown.cancel();
        tokio::time::sleep(Duration::from_millis(200)).await;
        for node in self.nodes.drain(..) {
            if let Ok(node) = Arc::try_unwrap(node) {
                node.stopped().await;
            }
        }
    }

    /// What PostgreSQL has done in this installation's database so far.
    pub async fn activity(&self) -> BenchResult<Activity> {
        // Statistics reach the shared counters when a session ends or goes idle: the services'
        // sessions have ended (`stop`), and this one's own are flushed first, on the connection
        // that then reads them.
        let mut conn = self.store.pool().acquire().await?;
        let _ = sqlx::query("SELECT pg_stat_force_next_flush()")
            .execute(&mut *conn)
            .await;
        let (commits, wal_bytes): (i64, i64) = sqlx::query_as(
            "SELECT xact_commit, (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint
             FROM pg_stat_database WHERE datname = current_database()",
        )
        .fetch_one(&mut *conn)
        .await?;
        let tables: Vec<(String, i64, i64, i64, i64)> = sqlx::query_as(
            "SELECT relname::text, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
             FROM pg_stat_user_tables ORDER BY relname",
        )
        .fetch_all(&mut *conn)
        .await?;
        Ok(Activity {
            commits,
            wal_bytes,
            tables: tables
                .into_iter()
                .map(|(name, inserted, updated, hot, deleted)| TableActivity {
                    name,
                    inserted,
                    updated,
                    hot,
                    deleted,
                })
                .collect(),
        })
    }

    /// Stops the instances and drops the database.
    pub async fn finish(mut self) -> BenchResult<()> {
        self.stop().await;
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

/// `binary ARGS…` as a process of its own on the installation of `settings` (its database and
/// prefix, no configuration file, logs at warn, output discarded), killed if dropped. Its worker,
/// if it runs one, may run the benchmark's noop tasks as root: the installation is a throwaway.
pub fn chime_process(
    settings: &Settings,
    binary: &std::path::Path,
    args: &[&str],
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(binary);
    command
        .args(args)
        .env("CHIME_DATABASE_URL", &settings.database_url)
        .env("CHIME_AMQP_URL", &settings.amqp_url)
        .env("CHIME_PREFIX", &settings.prefix)
        .env("CHIME_CONFIG", "/nonexistent/chime.toml")
        .env("CHIME_WORKER__ALLOW_OPEN_STORE", "true")
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .env_remove("CHIME_API_TOKEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    command
}

/// Row changes of one table, from `pg_stat_user_tables`.
#[derive(Debug, Clone, Default)]
pub struct TableActivity {
    /// The table.
    pub name: String,
    /// Rows inserted.
    pub inserted: i64,
    /// Rows updated (HOT ones included).
    pub updated: i64,
    /// Updates that were HOT (no index touched).
    pub hot: i64,
    /// Rows deleted.
    pub deleted: i64,
}

/// What PostgreSQL did in a benchmark's database: commits, WAL written (the whole server's) and
/// each table's row changes. Two snapshots give what happened between them.
#[derive(Debug, Clone, Default)]
pub struct Activity {
    /// Transactions committed in the database.
    pub commits: i64,
    /// The WAL position, bytes.
    pub wal_bytes: i64,
    /// Per table.
    pub tables: Vec<TableActivity>,
}

impl Activity {
    /// What happened since `before`, per task of `tasks`, as one line: commits, WAL bytes, rows
    /// inserted, updated (HOT) and deleted in all, then per table that changed.
    pub fn per_task_since(&self, before: &Activity, tasks: usize) -> String {
        let n = tasks.max(1) as f64;
        let mut total = TableActivity::default();
        let mut per_table = Vec::new();
        for table in &self.tables {
            let was = before
                .tables
                .iter()
                .find(|t| t.name == table.name)
                .cloned()
                .unwrap_or_default();
            let delta = TableActivity {
                name: table.name.clone(),
                inserted: table.inserted - was.inserted,
                updated: table.updated - was.updated,
                hot: table.hot - was.hot,
                deleted: table.deleted - was.deleted,
            };
            // Tables that changed by less than a row per 200 tasks (heartbeats, migrations) are
            // noise beside the per-task work.
            if (delta.inserted + delta.updated + delta.deleted) as f64 / n < 0.005 {
                continue;
            }
            total.inserted += delta.inserted;
            total.updated += delta.updated;
            total.hot += delta.hot;
            total.deleted += delta.deleted;
            per_table.push(format!(
                "{}={:.2}/{:.2}({:.2})/{:.2}",
                delta.name,
                delta.inserted as f64 / n,
                delta.updated as f64 / n,
                delta.hot as f64 / n,
                delta.deleted as f64 / n
            ));
        }
        format!(
            "postgres per task: commits={:.2} wal_bytes={:.0} inserted={:.2} updated={:.2} hot={:.2} deleted={:.2} (table=ins/upd(hot)/del: {})",
            (self.commits - before.commits) as f64 / n,
            (self.wal_bytes - before.wal_bytes) as f64 / n,
            total.inserted as f64 / n,
            total.updated as f64 / n,
            total.hot as f64 / n,
            total.deleted as f64 / n,
            per_table.join(" ")
        )
    }
}
