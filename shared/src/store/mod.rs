//! The PostgreSQL job store: one sqlx pool per process, migrations applied at start-up.
//!
//! The store is the source of truth (docs/ARCHITECTURE.md, section 2). Each submodule owns the statements of one
//! table family; a task's status moves only in [`task_lifecycle`].

pub mod attempt_output;
pub mod audit;
pub mod availability;
pub mod backfills;
pub mod calendars;
pub mod definitions;
pub mod dependencies;
pub mod dependency_grid;
pub mod gauges;
pub mod jobs;
pub mod kind_routes;
pub mod notify;
pub mod outbox;
pub mod patch;
pub mod retention;
pub mod services;
pub mod task_lifecycle;
pub mod tasks;
pub mod tokens;
pub mod triggers;
pub mod webhooks;
pub mod worker_groups;
pub mod workers;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool};

/// A store operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database URL does not parse.
    #[error("invalid database URL: {0}")]
    InvalidUrl(#[source] sqlx::Error),
    /// A statement or connection failed.
    #[error("{context}: {source}")]
    Database {
        /// What the store was doing.
        context: &'static str,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// Migrations could not be applied.
    #[error("applying migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A kind that is neither built in, routed, nor offered by a live worker.
    #[error(
        "unknown kind {0:?}: use shell, http, noop, a kind routed to a worker group (chime route \
         set), or a kind a running worker has a command template for"
    )]
    UnknownKind(String),
    /// A worker group that has not been declared (`chime group create`).
    #[error(
        "unknown worker group {0:?}: declare it with `chime group create {0}` (see `chime group list`)"
    )]
    UnknownGroup(String),
    /// No such task.
    #[error("task {0} not found")]
    TaskNotFound(uuid::Uuid),
    /// No such job, trigger or calendar.
    #[error("{0} not found")]
    NotFound(String),
    /// No such job or trigger in that group, but one of that name in others.
    #[error("{what} not found; there is {elsewhere}")]
    NotFoundInGroup {
        /// What was asked for (`trigger default.nightly`).
        what: String,
        /// Where that name is (`DEFAULT.nightly (--group "DEFAULT")`).
        elsewhere: String,
    },
    /// The input is wrong; nothing was written.
    #[error("{0}")]
    Invalid(String),
    /// It would clash with what exists (a duplicate name, a calendar in use).
    #[error("{0}")]
    Conflict(String),
    /// The caller may not make this change (a job's commands run as a user it may not name).
    #[error("{0}")]
    Forbidden(String),
}

impl StoreError {
    /// The error with the object it concerns in front (`job reports.daily: …`), as an apply
    /// reports the change that failed; a database error stays as it is.
    pub fn within(self, object: &str) -> Self {
        match self {
            Self::Conflict(m) => Self::Conflict(format!("{object}: {m}")),
            Self::Forbidden(m) => Self::Forbidden(format!("{object}: {m}")),
            Self::Database { .. } | Self::InvalidUrl(_) | Self::Migrate(_) => self,
            other => Self::Invalid(format!("{object}: {other}")),
        }
    }

    /// Whether PostgreSQL ended the transaction to break a deadlock: trying it again is right.
    pub fn is_deadlock(&self) -> bool {
        matches!(self, Self::Database { source: sqlx::Error::Database(e), .. }
            if e.code().as_deref() == Some("40P01"))
    }

    /// Whether PostgreSQL refused the statement for what it carried (a data exception, a broken
    /// constraint, a value too large, …): sent again, it would be refused again. An outage is
    /// not (no connection, a server shutting down, a deadlock, no resources: SQLSTATE classes
    /// 08, 40, 53, 57 and 58, or no answer at all).
    pub fn is_refused_data(&self) -> bool {
        matches!(self, Self::Database { source: sqlx::Error::Database(e), .. }
        if e.code().is_some_and(|code| {
            !["08", "40", "53", "57", "58"].iter().any(|class| code.starts_with(class))
        }))
    }
}

/// Adds what the store was doing to a driver error.
pub trait Context<T> {
    /// Wraps the error with `context`.
    fn context(self, context: &'static str) -> Result<T, StoreError>;
}

impl<T> Context<T> for Result<T, sqlx::Error> {
    fn context(self, context: &'static str) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Database { context, source })
    }
}

/// How long a session may sit idle inside a transaction before the server ends it (and rolls
/// the transaction back): what a frozen process can delay what its locks hold.
pub const IDLE_IN_TRANSACTION_TIMEOUT: &str = "5s";

/// How long a pooled connection may sit idle before it is closed: a process that was busy gives
/// its connections back to the server's budget soon after.
pub const IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// The job store of one chime process.
#[derive(Clone, Debug)]
pub struct Store {
    pool: PgPool,
    schema: Arc<str>,
    /// Wakes this process's outbox relay when this process wrote outbox rows.
    outbox_written: Arc<tokio::sync::Notify>,
}

/// "`kind` `group.name` not found", naming the groups that do have something of that name:
/// a Quartz store's triggers live in `DEFAULT`, not chime's `default`, and a user who left out
/// `--group` should be told where to look. `table` is `jobs` or `triggers`.
pub(crate) async fn not_found_in_group(
    store: &Store,
    table: &'static str,
    kind: &str,
    group: &str,
    name: &str,
) -> StoreError {
    let others: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT group_name FROM {table} WHERE name = $1 ORDER BY group_name LIMIT 3"
    )))
    .bind(name)
    .fetch_all(store.pool())
    .await
    .unwrap_or_default();
    if others.is_empty() {
        return StoreError::NotFound(format!("{kind} {group}.{name}"));
    }
    let shown: Vec<String> = others
        .iter()
        .map(|g| format!("{g}.{name} (--group {g:?})"))
        .collect();
    StoreError::NotFoundInGroup {
        what: format!("{kind} {group}.{name}"),
        elsewhere: shown.join(", "),
    }
}

impl Store {
    /// Connects to `url`, creating the database if it does not exist, and applies the migrations.
    pub async fn connect(url: &str, pool_size: u32) -> Result<Self, StoreError> {
        Self::connect_with(url, pool_size, Duration::from_secs(30), false).await
    }

    /// [`Store::connect`], waiting at most `acquire_timeout` for a connection. A failed
    /// connection attempt backs off up to a fifth of the time left, so a long wait also means a
    /// slow return after a PostgreSQL outage: a background service (a scheduler, a worker, a
    /// dependency service), which retries its round anyway, wants a short one; the API, whose
    /// bursts queue for connections, a long one.
    ///
    /// `own_relay`: this process runs an outbox relay that publishes what it writes (woken by
    /// [`Store::outbox_written`]), so its outbox rows need not wake other processes' relays
    /// with a NOTIFY.
    pub async fn connect_with(
        url: &str,
        pool_size: u32,
        acquire_timeout: Duration,
        own_relay: bool,
    ) -> Result<Self, StoreError> {
        crate::config::check_database_url(url).map_err(StoreError::Invalid)?;
        let options = PgConnectOptions::from_str(url)
            .map_err(StoreError::InvalidUrl)?
            // A process frozen inside a transaction (SIGSTOP, a stalled runtime, a VM pause)
            // would hold its row locks for as long as it is frozen: a trigger it was firing could
            // not be fired by any other instance. The server ends such a session instead.
            .options([(
                "idle_in_transaction_session_timeout",
                IDLE_IN_TRANSACTION_TIMEOUT,
            )]);
        // Read by the outbox's insert trigger (migration 0014).
        let options = if own_relay {
            options.options([("chime.own_relay", "on")])
        } else {
            options
        };
        // pg_stat_activity names the process each session belongs to.
        let options = if options.get_application_name().is_none() {
            options.application_name(&format!("chime[{}]", std::process::id()))
        } else {
            options
        };
        ensure_database(&options).await?;
        let pool = PgPoolOptions::new()
            .max_connections(pool_size.max(1))
            .min_connections(0)
            .idle_timeout(IDLE_CONNECTION_TIMEOUT)
            .acquire_timeout(acquire_timeout)
            // A connection that lands on a standby (a failover under way) is refused and tried
            // again, never handed out.
            .after_connect(|conn, _| Box::pin(availability::refuse_standby(conn)))
            .connect_with(options)
            .await
            .context("connecting to PostgreSQL")?;
        let store = Self::from_pool(pool).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Wraps an existing pool (no migrations).
    pub async fn from_pool(pool: PgPool) -> Result<Self, StoreError> {
        let schema: String = sqlx::query_scalar("SELECT current_schema()")
            .fetch_one(&pool)
            .await
            .context("reading the current schema")?;
        Ok(Self {
            pool,
            schema: schema.into(),
            outbox_written: Arc::default(),
        })
    }

    /// Applies pending migrations (idempotent; concurrent callers wait on sqlx's advisory lock).
    ///
    /// A store already at the latest migration is left alone without taking sqlx's migration
    /// lock, a session-level advisory lock: behind a PgBouncer in transaction mode its lock and
    /// unlock could land on different server sessions, and the lock would stay held.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let migrator = sqlx::migrate!("../migrations");
        let latest = migrator.iter().map(|m| m.version).max().unwrap_or(0);
        let table: Option<String> =
            sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations')::text")
                .fetch_one(&self.pool)
                .await
                .context("looking for the migrations table")?;
        if table.is_some() {
            let applied: Option<i64> =
                sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success")
                    .fetch_one(&self.pool)
                    .await
                    .context("reading the applied migrations")?;
            if applied.is_some_and(|v| v >= latest) {
                return Ok(());
            }
        }
        migrator.run(&self.pool).await?;
        Ok(())
    }

    /// Starts a transaction on the pool.
    pub async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, StoreError> {
        self.pool.begin().await.context("starting a transaction")
    }

    /// The connection pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The schema this store lives in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The NOTIFY channel that wakes the schedulers of this schema.
    pub fn triggers_channel(&self) -> String {
        format!("{}.triggers", self.schema)
    }

    /// Tells this process's outbox relay that rows were committed for it to publish now: a relay
    /// that does not LISTEN (a worker's, a dependency service's, an API's) otherwise finds them
    /// at its next poll, or another process's listening relay does.
    pub fn outbox_written(&self) {
        self.outbox_written.notify_one();
    }

    /// Resolves when [`Store::outbox_written`] is called (or was, since the last wait).
    pub async fn outbox_hint(&self) {
        self.outbox_written.notified().await;
    }

    /// The NOTIFY channel that wakes outbox relays of this schema.
    pub fn outbox_channel(&self) -> String {
        format!("{}.outbox", self.schema)
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .context("pinging PostgreSQL")?;
        Ok(())
    }

    /// Closes the pool, waiting for connections in use to be returned.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Creates the database named in `options` if it is missing, through the `postgres` maintenance
/// database. Two processes racing to create it is fine: the loser sees it exists.
async fn ensure_database(options: &PgConnectOptions) -> Result<(), StoreError> {
    let Some(name) = options.get_database().map(str::to_owned) else {
        return Ok(());
    };
    // The database is there (the usual case): no need for the maintenance database, which a
    // managed service or a PgBouncer may not offer.
    match options.connect().await {
        Ok(conn) => {
            let _ = conn.close().await;
            return Ok(());
        }
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("3D000") => {}
        Err(e) => return Err(e).context("connecting to PostgreSQL"),
    }
    let mut admin = options
        .clone()
        .database("postgres")
        .connect()
        .await
        .context("connecting to the postgres maintenance database")?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(&name)
            .fetch_one(&mut admin)
            .await
            .context("looking up the database")?;
    if !exists {
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        // The name is quoted as an identifier above; CREATE DATABASE takes no parameters.
        match sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {quoted}")))
            .execute(&mut admin)
            .await
        {
            Ok(_) => tracing::info!(database = %name, "created database"),
            // duplicate_database, or a unique violation when two creators race
            Err(sqlx::Error::Database(e))
                if matches!(e.code().as_deref(), Some("42P04") | Some("23505")) => {}
            Err(e) => return Err(e).context("creating the database"),
        }
    }
    let _ = admin.close().await;
    Ok(())
}
