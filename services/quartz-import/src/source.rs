//! Reading a Quartz store: finds the eleven `QRTZ_*` tables (under any prefix and schema, in any
//! letter case), refuses a store a node is still checking in to, and reads every row of one
//! scheduler in one `REPEATABLE READ, READ ONLY` transaction, so what is imported is one
//! consistent moment of the store and the store is never written.
//!
//! Every column is read as text (blobs as bytes) and parsed here, because stores made from other
//! vendors' scripts keep booleans as `'1'`/`'0'` and some keep numbers in other types; what cannot
//! be parsed is an error naming the table, the column and the value.

use std::collections::HashMap;

use futures::TryStreamExt as _;
use jiff::Timestamp;
use sqlx::postgres::PgRow;
use sqlx::{Connection, PgConnection, Row};

/// The tables of a Quartz 2.x JDBC job store, without their prefix.
pub const TABLES: [&str; 11] = [
    "JOB_DETAILS",
    "TRIGGERS",
    "SIMPLE_TRIGGERS",
    "CRON_TRIGGERS",
    "SIMPROP_TRIGGERS",
    "BLOB_TRIGGERS",
    "CALENDARS",
    "PAUSED_TRIGGER_GRPS",
    "FIRED_TRIGGERS",
    "SCHEDULER_STATE",
    "LOCKS",
];

/// How long past its check-in interval a node still counts as alive, as Quartz's own cluster
/// manager judges it (`JobStoreSupport.calcFailedIfAfter`).
pub const CHECKIN_GRACE_MS: i64 = 7_500;

/// Why a store could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The database could not be reached or answered with an error.
    #[error("{what}: {said}")]
    Database {
        /// What was being done.
        what: String,
        /// What PostgreSQL or the connection said.
        said: String,
    },
    /// The prefix names no Quartz store, or only part of one.
    #[error(
        "not a Quartz store: no table {missing} (looked for the prefix {prefix:?}{where_}; give \
         --table-prefix, which may name a schema as `schema.QRTZ_`)",
        missing = .missing.join(", "),
        where_ = .schema.as_ref().map(|s| format!(" in schema {s:?}")).unwrap_or_else(|| " in the search path".into())
    )]
    NotAQuartzStore {
        /// The tables not found, prefixed.
        missing: Vec<String>,
        /// The prefix looked for.
        prefix: String,
        /// The schema looked in, if one was named.
        schema: Option<String>,
    },
    /// The table prefix is not usable.
    #[error("table prefix {0:?}: use letters, digits and '_', optionally after `schema.`")]
    BadPrefix(String),
    /// The store holds no scheduler at all.
    #[error("the Quartz store holds no scheduler: it has no jobs, triggers or calendars")]
    Empty,
    /// Several schedulers share the store and none was chosen.
    #[error("the store holds several schedulers: {}; choose one with --scheduler", .0.join(", "))]
    SeveralSchedulers(Vec<String>),
    /// The scheduler asked for is not in the store.
    #[error("the store holds no scheduler {wanted:?} (it holds: {})", .present.join(", "))]
    NoSuchScheduler {
        /// The name asked for.
        wanted: String,
        /// The names present.
        present: Vec<String>,
    },
    /// A node is still running on the store.
    #[error(
        "Quartz node {instance:?} of scheduler {scheduler:?} checked in {ago_ms} ms ago (every \
         {interval_ms} ms): it is alive. Stop every node cleanly first (Scheduler.shutdown(true); \
         not standby() or pauseAll(), which leave it changing the store or mark every trigger \
         paused), then import; --force imports anyway"
    )]
    LiveNode {
        /// The scheduler.
        scheduler: String,
        /// The node's instance id.
        instance: String,
        /// How long ago it checked in.
        ago_ms: i64,
        /// Its check-in interval.
        interval_ms: i64,
    },
    /// A value that cannot be what Quartz writes there.
    #[error("{table}.{column} = {value:?} of {row}: {why}")]
    BadValue {
        /// The table, prefixed.
        table: String,
        /// The column.
        column: &'static str,
        /// The value as text.
        value: String,
        /// Which row (its key).
        row: String,
        /// What was expected.
        why: &'static str,
    },
}

fn db(what: impl Into<String>) -> impl FnOnce(sqlx::Error) -> SourceError {
    let what = what.into();
    move |error| SourceError::Database {
        what,
        said: said(&error),
    }
}

/// What a database error says, without the server's source location sqlx appends.
pub(crate) fn said(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Database(e) => e.message().to_string(),
        other => other.to_string(),
    }
}

/// What to read.
#[derive(Debug, Clone)]
pub struct SourceOptions {
    /// `--scheduler`: Quartz's `SCHED_NAME`; None takes the only one.
    pub scheduler: Option<String>,
    /// `--table-prefix`, default `QRTZ_`; may be `schema.QRTZ_`.
    pub table_prefix: String,
    /// `--force`: read a store a node still checks in to.
    pub force: bool,
    /// The time a check-in is judged at.
    pub now: Timestamp,
    /// `--max-blob-bytes`: a longer blob is not fetched, and its item cannot be imported.
    pub max_blob_bytes: u64,
}

/// How many bytes one blob (job data, a calendar, a blob trigger) may have by default: Quartz's
/// own are a few KB; a larger one is reported as unreadable and never fetched.
pub const DEFAULT_MAX_BLOB_BYTES: u64 = 1 << 20;

/// A blob column: absent, its bytes, or too large to be fetched.
pub type Blob = Result<Option<Vec<u8>>, TooLarge>;

/// A blob over `--max-blob-bytes`, left in the store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{column} is {bytes} bytes, over the limit of {limit} (--max-blob-bytes raises it)")]
pub struct TooLarge {
    /// The column.
    pub column: &'static str,
    /// Its length.
    pub bytes: u64,
    /// The limit it is over.
    pub limit: u64,
}

/// A `QRTZ_JOB_DETAILS` row.
#[derive(Debug, Clone)]
pub struct JobRow {
    /// `JOB_GROUP`.
    pub group: String,
    /// `JOB_NAME`.
    pub name: String,
    /// `DESCRIPTION`.
    pub description: Option<String>,
    /// `JOB_CLASS_NAME`.
    pub class: String,
    /// `IS_DURABLE`.
    pub durable: bool,
    /// `IS_NONCONCURRENT`: `@DisallowConcurrentExecution` when the job was stored.
    pub nonconcurrent: bool,
    /// `IS_UPDATE_DATA`: `@PersistJobDataAfterExecution` when the job was stored.
    pub update_data: bool,
    /// `REQUESTS_RECOVERY`.
    pub requests_recovery: bool,
    /// `JOB_DATA`.
    pub data: Blob,
}

/// A `QRTZ_TRIGGERS` row with the row of its kind's table.
#[derive(Debug, Clone)]
pub struct TriggerRow {
    /// `TRIGGER_GROUP`.
    pub group: String,
    /// `TRIGGER_NAME`.
    pub name: String,
    /// `JOB_GROUP`.
    pub job_group: String,
    /// `JOB_NAME`.
    pub job_name: String,
    /// `DESCRIPTION`.
    pub description: Option<String>,
    /// `NEXT_FIRE_TIME` (ms since the epoch; `<= 0` or NULL: none).
    pub next_fire_time: Option<i64>,
    /// `PREV_FIRE_TIME` (`-1`: none).
    pub prev_fire_time: Option<i64>,
    /// `PRIORITY` (NULL: Quartz's default 5).
    pub priority: Option<i32>,
    /// `TRIGGER_STATE`.
    pub state: String,
    /// `TRIGGER_TYPE`: SIMPLE, CRON, CAL_INT, DAILY_I, BLOB or a custom one.
    pub kind: String,
    /// `START_TIME`.
    pub start_time: i64,
    /// `END_TIME` (`0`: none).
    pub end_time: Option<i64>,
    /// `CALENDAR_NAME`.
    pub calendar: Option<String>,
    /// `MISFIRE_INSTR`.
    pub misfire_instruction: Option<i32>,
    /// `JOB_DATA`.
    pub data: Blob,
    /// The row of the kind's own table.
    pub detail: TriggerDetail,
}

/// The columns of a trigger's kind, from its own table.
#[derive(Debug, Clone)]
pub enum TriggerDetail {
    /// `QRTZ_SIMPLE_TRIGGERS`.
    Simple {
        /// `REPEAT_COUNT` (-1: forever).
        repeat_count: i64,
        /// `REPEAT_INTERVAL`, ms.
        repeat_interval: i64,
        /// `TIMES_TRIGGERED`.
        times_triggered: i64,
    },
    /// `QRTZ_CRON_TRIGGERS`.
    Cron {
        /// `CRON_EXPRESSION`.
        expression: String,
        /// `TIME_ZONE_ID` (NULL: the JVM's zone).
        time_zone: Option<String>,
    },
    /// `QRTZ_SIMPROP_TRIGGERS`: calendar-interval and daily-time-interval triggers.
    Properties(SimpleProperties),
    /// `QRTZ_BLOB_TRIGGERS.BLOB_DATA`.
    Blob(Blob),
    /// The kind's table has no row for the trigger.
    Missing,
}

/// A `QRTZ_SIMPROP_TRIGGERS` row.
#[derive(Debug, Clone, Default)]
pub struct SimpleProperties {
    /// `STR_PROP_1`, `STR_PROP_2`, `STR_PROP_3`.
    pub strings: [Option<String>; 3],
    /// `INT_PROP_1`, `INT_PROP_2`.
    pub ints: [Option<i64>; 2],
    /// `LONG_PROP_1`, `LONG_PROP_2`.
    pub longs: [Option<i64>; 2],
    /// `BOOL_PROP_1`, `BOOL_PROP_2`.
    pub bools: [Option<bool>; 2],
}

/// A `QRTZ_CALENDARS` row.
#[derive(Debug, Clone)]
pub struct CalendarRow {
    /// `CALENDAR_NAME`.
    pub name: String,
    /// `CALENDAR`: a Java-serialized `org.quartz.Calendar`.
    pub blob: Blob,
}

/// A `QRTZ_FIRED_TRIGGERS` row: a fire a node had acquired or was running when it stopped.
#[derive(Debug, Clone)]
pub struct FiredRow {
    /// `ENTRY_ID`.
    pub entry_id: String,
    /// `TRIGGER_GROUP`.
    pub trigger_group: String,
    /// `TRIGGER_NAME`.
    pub trigger_name: String,
    /// `INSTANCE_NAME`: the node's instance id.
    pub instance: String,
    /// `FIRED_TIME`.
    pub fired_time: i64,
    /// `SCHED_TIME`.
    pub sched_time: i64,
    /// `PRIORITY`.
    pub priority: i32,
    /// `STATE`: ACQUIRED, EXECUTING (or BLOCKED, PAUSED_BLOCKED in old stores).
    pub state: String,
    /// `JOB_GROUP`, for a fire that was executing.
    pub job_group: Option<String>,
    /// `JOB_NAME`.
    pub job_name: Option<String>,
    /// `REQUESTS_RECOVERY`.
    pub requests_recovery: bool,
}

/// A `QRTZ_SCHEDULER_STATE` row.
#[derive(Debug, Clone)]
pub struct NodeRow {
    /// `INSTANCE_NAME`: the node's instance id.
    pub instance: String,
    /// `LAST_CHECKIN_TIME`.
    pub last_checkin: i64,
    /// `CHECKIN_INTERVAL`.
    pub checkin_interval: i64,
}

/// One scheduler of a Quartz store, as read.
#[derive(Debug, Clone)]
pub struct QuartzStore {
    /// Its `SCHED_NAME`.
    pub scheduler: String,
    /// The tables' prefix as found (`public.qrtz_`).
    pub tables: String,
    /// Its jobs.
    pub jobs: Vec<JobRow>,
    /// Its triggers.
    pub triggers: Vec<TriggerRow>,
    /// Its calendars.
    pub calendars: Vec<CalendarRow>,
    /// `QRTZ_PAUSED_TRIGGER_GRPS`.
    pub paused_groups: Vec<String>,
    /// `QRTZ_FIRED_TRIGGERS`.
    pub fired: Vec<FiredRow>,
    /// `QRTZ_SCHEDULER_STATE`.
    pub nodes: Vec<NodeRow>,
}

/// The eleven tables, found: their quoted names and each one's columns by lower-case name.
struct Tables {
    quoted: HashMap<&'static str, String>,
    columns: HashMap<&'static str, HashMap<String, String>>,
    shown: String,
    /// `--max-blob-bytes`.
    max_blob: u64,
}

impl Tables {
    fn table(&self, suffix: &'static str) -> &str {
        self.quoted.get(suffix).map_or("", String::as_str)
    }

    /// `SELECT` list: each column cast to text (or bytea), by its real name. A bytea column
    /// longer than `max_blob` comes as NULL, and the lengths of the bytea columns follow the
    /// columns asked for, in their order, so a blob too large is never fetched but still named.
    fn select(&self, suffix: &'static str, columns: &[&'static str], max_blob: u64) -> String {
        let real = self.columns.get(suffix);
        let mut lengths = Vec::new();
        let mut list: Vec<String> = columns
            .iter()
            .map(|c| {
                let (name, cast) = match c.strip_suffix(":bytea") {
                    Some(name) => (name, "bytea"),
                    None => (*c, "text"),
                };
                match real.and_then(|r| r.get(name)) {
                    Some(real) if cast == "bytea" => {
                        let value = format!("{}::bytea", quote(real));
                        lengths.push(format!("octet_length({value})::int8"));
                        format!("CASE WHEN octet_length({value}) <= {max_blob} THEN {value} END")
                    }
                    Some(real) => format!("{}::{cast}", quote(real)),
                    None if cast == "bytea" => {
                        lengths.push("NULL::int8".into());
                        "NULL::bytea".into()
                    }
                    None => format!("NULL::{cast}"),
                }
            })
            .collect();
        list.extend(lengths);
        list.join(", ")
    }
}

fn quote(identifier: &str) -> String {
    format!("\"{}\"", identifier.replace('"', "\"\""))
}

/// Reads one scheduler of the store at `url`.
pub async fn read(url: &str, options: &SourceOptions) -> Result<QuartzStore, SourceError> {
    let mut connection = PgConnection::connect(url)
        .await
        .map_err(db("connecting to the Quartz database"))?;
    let mut tx = connection
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .await
        .map_err(db(
            "starting a read-only transaction on the Quartz database",
        ))?;
    let mut tables = find_tables(&mut tx, &options.table_prefix).await?;
    tables.max_blob = options.max_blob_bytes;
    let scheduler = choose_scheduler(&mut tx, &tables, options.scheduler.as_deref()).await?;
    let nodes = read_nodes(&mut tx, &tables, &scheduler).await?;
    if !options.force {
        let now = options.now.as_millisecond();
        if let Some(node) = nodes.iter().find(|n| {
            now.saturating_sub(n.last_checkin) < n.checkin_interval.saturating_add(CHECKIN_GRACE_MS)
        }) {
            return Err(SourceError::LiveNode {
                scheduler,
                instance: node.instance.clone(),
                ago_ms: now.saturating_sub(node.last_checkin),
                interval_ms: node.checkin_interval,
            });
        }
    }
    let store = QuartzStore {
        jobs: read_jobs(&mut tx, &tables, &scheduler).await?,
        triggers: read_triggers(&mut tx, &tables, &scheduler).await?,
        calendars: read_calendars(&mut tx, &tables, &scheduler).await?,
        paused_groups: read_paused_groups(&mut tx, &tables, &scheduler).await?,
        fired: read_fired(&mut tx, &tables, &scheduler).await?,
        nodes,
        tables: tables.shown.clone(),
        scheduler,
    };
    // Read only: nothing to commit, and nothing left behind.
    tx.rollback()
        .await
        .map_err(db("ending the read-only transaction"))?;
    Ok(store)
}

/// Finds the tables of `prefix` (`QRTZ_` or `schema.QRTZ_`), case-insensitively: in the named
/// schema, or the first schema of the search path that has them.
async fn find_tables(conn: &mut PgConnection, prefix: &str) -> Result<Tables, SourceError> {
    let (schema, table_prefix) = match prefix.rsplit_once('.') {
        Some((schema, rest)) => (Some(schema.to_string()), rest.to_string()),
        None => (None, prefix.to_string()),
    };
    let plain = |s: &str| {
        s.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
    };
    if table_prefix.is_empty()
        || !plain(&table_prefix)
        || schema.as_deref().is_some_and(|s| s.is_empty() || !plain(s))
    {
        return Err(SourceError::BadPrefix(prefix.to_string()));
    }
    let wanted: Vec<String> = TABLES
        .iter()
        .map(|t| format!("{table_prefix}{t}").to_lowercase())
        .collect();
    // Tables in the schema asked for, or in the search path, nearest first.
    let rows = sqlx::query(
        "SELECT c.table_schema, c.table_name, c.column_name
         FROM information_schema.columns c
         WHERE lower(c.table_name) = ANY($1)
           AND CASE WHEN $2::text IS NULL THEN c.table_schema = ANY(current_schemas(false))
                    ELSE lower(c.table_schema) = lower($2) END
         ORDER BY array_position(current_schemas(false), c.table_schema::name),
                  c.table_schema, c.table_name = lower(c.table_name) DESC, c.table_name",
    )
    .bind(&wanted)
    .bind(schema.as_deref())
    .fetch_all(&mut *conn)
    .await
    .map_err(db("looking for the Quartz tables"))?;
    // Every matching table by schema, schemas in search-path order; the store is the first
    // schema holding all eleven, so tables are never mixed from two schemas.
    type Found = HashMap<&'static str, (String, HashMap<String, String>)>;
    let mut schemas: Vec<(String, Found)> = Vec::new();
    for row in rows {
        let (table_schema, table_name, column): (String, String, String) = (
            row.try_get(0).map_err(db("reading the catalogue"))?,
            row.try_get(1).map_err(db("reading the catalogue"))?,
            row.try_get(2).map_err(db("reading the catalogue"))?,
        );
        let Some(suffix) = TABLES
            .iter()
            .find(|t| format!("{table_prefix}{t}").eq_ignore_ascii_case(&table_name))
        else {
            continue;
        };
        let position = match schemas.iter().position(|(s, _)| *s == table_schema) {
            Some(position) => position,
            None => {
                schemas.push((table_schema.clone(), HashMap::new()));
                schemas.len() - 1
            }
        };
        let Some((_, found)) = schemas.get_mut(position) else {
            continue;
        };
        // Of two tables differing only in letter case, the first (the unquoted one) is read.
        let (name, columns) = found
            .entry(suffix)
            .or_insert_with(|| (table_name.clone(), HashMap::new()));
        if *name == table_name {
            columns.insert(column.to_lowercase(), column);
        }
    }
    let best = schemas
        .iter()
        .position(|(_, found)| found.len() == TABLES.len())
        .or_else(|| {
            (0..schemas.len()).max_by_key(|i| {
                (
                    schemas.get(*i).map_or(0, |(_, f)| f.len()),
                    std::cmp::Reverse(*i),
                )
            })
        });
    let (home, found) = best
        .and_then(|i| schemas.get(i).cloned())
        .unwrap_or_default();
    let missing: Vec<String> = TABLES
        .iter()
        .filter(|t| !found.contains_key(*t))
        .map(|t| format!("{table_prefix}{t}"))
        .collect();
    if !missing.is_empty() {
        return Err(SourceError::NotAQuartzStore {
            missing,
            prefix: prefix.to_string(),
            schema,
        });
    }
    let mut quoted = HashMap::new();
    let mut columns = HashMap::new();
    for (suffix, (name, cols)) in found {
        quoted.insert(suffix, format!("{}.{}", quote(&home), quote(&name)));
        columns.insert(suffix, cols);
    }
    let shown = format!("{home}.{table_prefix}");
    Ok(Tables {
        quoted,
        columns,
        shown,
        max_blob: DEFAULT_MAX_BLOB_BYTES,
    })
}

async fn choose_scheduler(
    conn: &mut PgConnection,
    tables: &Tables,
    wanted: Option<&str>,
) -> Result<String, SourceError> {
    let statement = [
        "JOB_DETAILS",
        "TRIGGERS",
        "CALENDARS",
        "PAUSED_TRIGGER_GRPS",
        "SCHEDULER_STATE",
    ]
    .iter()
    .map(|t| {
        format!(
            "SELECT {} FROM {}",
            tables.select(t, &["sched_name"], 0),
            tables.table(t)
        )
    })
    .collect::<Vec<_>>()
    .join(" UNION ");
    let mut present: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(statement))
        .fetch_all(&mut *conn)
        .await
        .map_err(db("listing the store's schedulers"))?;
    present.sort();
    present.dedup();
    match wanted {
        Some(wanted) if present.iter().any(|p| p == wanted) => Ok(wanted.to_string()),
        Some(wanted) => Err(SourceError::NoSuchScheduler {
            wanted: wanted.to_string(),
            present,
        }),
        None => match present.as_slice() {
            [] => Err(SourceError::Empty),
            [only] => Ok(only.clone()),
            _ => Err(SourceError::SeveralSchedulers(present)),
        },
    }
}

/// Reads `columns` of `suffix`'s rows of `scheduler`, each row as text values, turning each
/// into what `each` makes of it as it arrives: a store's rows are never all held at once, only
/// what is made of them.
async fn rows<T>(
    conn: &mut PgConnection,
    tables: &Tables,
    suffix: &'static str,
    columns: &[&'static str],
    scheduler: &str,
    mut each: impl FnMut(&PgRow) -> Result<T, SourceError>,
) -> Result<Vec<T>, SourceError> {
    let statement = format!(
        "SELECT {} FROM {} WHERE {} = $1",
        tables.select(suffix, columns, tables.max_blob),
        tables.table(suffix),
        tables.select(suffix, &["sched_name"], 0),
    );
    let mut found = Vec::new();
    let mut stream = sqlx::query(sqlx::AssertSqlSafe(statement))
        .bind(scheduler)
        .fetch(&mut *conn);
    while let Some(row) = stream
        .try_next()
        .await
        .map_err(db(format!("reading {}", tables.table(suffix))))?
    {
        found.push(each(&row)?);
    }
    Ok(found)
}

/// Reads one row's values by position, naming the table and row in errors.
struct Cells<'a> {
    row: &'a PgRow,
    table: &'a str,
    key: String,
}

impl<'a> Cells<'a> {
    fn new(row: &'a PgRow, table: &'a str) -> Self {
        Self {
            row,
            table,
            key: String::new(),
        }
    }

    fn text(&self, i: usize) -> Result<Option<String>, SourceError> {
        self.row
            .try_get::<Option<String>, _>(i)
            .map_err(db(format!("reading {}", self.table)))
    }

    fn string(&self, i: usize, column: &'static str) -> Result<String, SourceError> {
        self.text(i)?
            .ok_or_else(|| self.bad(column, "NULL", "must not be NULL"))
    }

    /// The blob in column `i`, its length in column `length` (see [`Tables::select`]).
    fn blob(
        &self,
        i: usize,
        length: usize,
        column: &'static str,
        limit: u64,
    ) -> Result<Blob, SourceError> {
        let bytes = self
            .row
            .try_get::<Option<Vec<u8>>, _>(i)
            .map_err(db(format!("reading {}", self.table)))?;
        let stored = self
            .row
            .try_get::<Option<i64>, _>(length)
            .map_err(db(format!("reading {}", self.table)))?;
        Ok(match (bytes, stored) {
            (None, Some(stored)) => Err(TooLarge {
                column,
                bytes: u64::try_from(stored).unwrap_or(0),
                limit,
            }),
            (bytes, _) => Ok(bytes),
        })
    }

    fn long(&self, i: usize, column: &'static str) -> Result<Option<i64>, SourceError> {
        match self.text(i)? {
            None => Ok(None),
            Some(text) => text
                .trim()
                .parse::<i64>()
                .or_else(|_| {
                    // numeric(13,4) and the like: whole numbers only.
                    text.trim()
                        .strip_suffix(".0000")
                        .or_else(|| text.trim().strip_suffix(".0"))
                        .ok_or(())
                        .and_then(|t| t.parse::<i64>().map_err(|_| ()))
                })
                .map(Some)
                .map_err(|()| self.bad(column, &text, "not a whole number")),
        }
    }

    fn int(&self, i: usize, column: &'static str) -> Result<Option<i32>, SourceError> {
        match self.long(i, column)? {
            None => Ok(None),
            Some(v) => i32::try_from(v)
                .map(Some)
                .map_err(|_| self.bad(column, &v.to_string(), "out of a Java int's range")),
        }
    }

    fn boolean(&self, i: usize, column: &'static str) -> Result<Option<bool>, SourceError> {
        match self.text(i)? {
            None => Ok(None),
            Some(text) => match text.trim().to_ascii_lowercase().as_str() {
                "t" | "true" | "1" | "y" | "yes" => Ok(Some(true)),
                "f" | "false" | "0" | "n" | "no" | "" => Ok(Some(false)),
                _ => Err(self.bad(column, &text, "not a boolean")),
            },
        }
    }

    fn bad(&self, column: &'static str, value: &str, why: &'static str) -> SourceError {
        SourceError::BadValue {
            table: self.table.to_string(),
            column,
            value: value.chars().take(100).collect(),
            row: self.key.clone(),
            why,
        }
    }
}

async fn read_nodes(
    conn: &mut PgConnection,
    tables: &Tables,
    scheduler: &str,
) -> Result<Vec<NodeRow>, SourceError> {
    let table = tables.table("SCHEDULER_STATE");
    rows(
        conn,
        tables,
        "SCHEDULER_STATE",
        &["instance_name", "last_checkin_time", "checkin_interval"],
        scheduler,
        |row| {
            let mut c = Cells::new(row, table);
            let instance = c.string(0, "INSTANCE_NAME")?;
            c.key = instance.clone();
            Ok(NodeRow {
                instance,
                last_checkin: c.long(1, "LAST_CHECKIN_TIME")?.unwrap_or(0),
                checkin_interval: c.long(2, "CHECKIN_INTERVAL")?.unwrap_or(0),
            })
        },
    )
    .await
}

async fn read_jobs(
    conn: &mut PgConnection,
    tables: &Tables,
    scheduler: &str,
) -> Result<Vec<JobRow>, SourceError> {
    let table = tables.table("JOB_DETAILS");
    rows(
        conn,
        tables,
        "JOB_DETAILS",
        &[
            "job_group",
            "job_name",
            "description",
            "job_class_name",
            "is_durable",
            "is_nonconcurrent",
            "is_update_data",
            "requests_recovery",
            "job_data:bytea",
        ],
        scheduler,
        |row| {
            let mut c = Cells::new(row, table);
            let (group, name) = (c.string(0, "JOB_GROUP")?, c.string(1, "JOB_NAME")?);
            c.key = format!("job {group}.{name}");
            Ok(JobRow {
                description: c.text(2)?,
                class: c.string(3, "JOB_CLASS_NAME")?,
                durable: c.boolean(4, "IS_DURABLE")?.unwrap_or(false),
                nonconcurrent: c.boolean(5, "IS_NONCONCURRENT")?.unwrap_or(false),
                update_data: c.boolean(6, "IS_UPDATE_DATA")?.unwrap_or(false),
                requests_recovery: c.boolean(7, "REQUESTS_RECOVERY")?.unwrap_or(false),
                data: c.blob(8, 9, "JOB_DATA", tables.max_blob)?,
                group,
                name,
            })
        },
    )
    .await
}

type TriggerKey = (String, String);

async fn read_triggers(
    conn: &mut PgConnection,
    tables: &Tables,
    scheduler: &str,
) -> Result<Vec<TriggerRow>, SourceError> {
    let mut details: HashMap<TriggerKey, TriggerDetail> = HashMap::new();
    let key_of = |c: &mut Cells<'_>| -> Result<TriggerKey, SourceError> {
        let key = (c.string(0, "TRIGGER_GROUP")?, c.string(1, "TRIGGER_NAME")?);
        c.key = format!("trigger {}.{}", key.0, key.1);
        Ok(key)
    };
    let keyed = ["trigger_group", "trigger_name"];

    let table = tables.table("SIMPLE_TRIGGERS");
    let columns = [
        &keyed[..],
        &["repeat_count", "repeat_interval", "times_triggered"],
    ]
    .concat();
    rows(
        conn,
        tables,
        "SIMPLE_TRIGGERS",
        &columns,
        scheduler,
        |row| {
            let mut c = Cells::new(row, table);
            let key = key_of(&mut c)?;
            let detail = TriggerDetail::Simple {
                repeat_count: c.long(2, "REPEAT_COUNT")?.unwrap_or(0),
                repeat_interval: c.long(3, "REPEAT_INTERVAL")?.unwrap_or(0),
                times_triggered: c.long(4, "TIMES_TRIGGERED")?.unwrap_or(0),
            };
            details.insert(key, detail);
            Ok(())
        },
    )
    .await?;
    let table = tables.table("CRON_TRIGGERS");
    let columns = [&keyed[..], &["cron_expression", "time_zone_id"]].concat();
    rows(conn, tables, "CRON_TRIGGERS", &columns, scheduler, |row| {
        let mut c = Cells::new(row, table);
        let key = key_of(&mut c)?;
        let detail = TriggerDetail::Cron {
            expression: c.string(2, "CRON_EXPRESSION")?,
            time_zone: c.text(3)?.filter(|z| !z.trim().is_empty()),
        };
        details.insert(key, detail);
        Ok(())
    })
    .await?;
    let table = tables.table("SIMPROP_TRIGGERS");
    let columns = [
        &keyed[..],
        &[
            "str_prop_1",
            "str_prop_2",
            "str_prop_3",
            "int_prop_1",
            "int_prop_2",
            "long_prop_1",
            "long_prop_2",
            "bool_prop_1",
            "bool_prop_2",
        ],
    ]
    .concat();
    rows(
        conn,
        tables,
        "SIMPROP_TRIGGERS",
        &columns,
        scheduler,
        |row| {
            let mut c = Cells::new(row, table);
            let key = key_of(&mut c)?;
            let detail = TriggerDetail::Properties(SimpleProperties {
                strings: [c.text(2)?, c.text(3)?, c.text(4)?],
                ints: [c.long(5, "INT_PROP_1")?, c.long(6, "INT_PROP_2")?],
                longs: [c.long(7, "LONG_PROP_1")?, c.long(8, "LONG_PROP_2")?],
                bools: [c.boolean(9, "BOOL_PROP_1")?, c.boolean(10, "BOOL_PROP_2")?],
            });
            details.insert(key, detail);
            Ok(())
        },
    )
    .await?;
    let table = tables.table("BLOB_TRIGGERS");
    let columns = [&keyed[..], &["blob_data:bytea"]].concat();
    rows(conn, tables, "BLOB_TRIGGERS", &columns, scheduler, |row| {
        let mut c = Cells::new(row, table);
        let key = key_of(&mut c)?;
        let blob = c.blob(2, 3, "BLOB_DATA", tables.max_blob)?;
        details.insert(key, TriggerDetail::Blob(blob));
        Ok(())
    })
    .await?;

    let table = tables.table("TRIGGERS");
    let columns = [
        &keyed[..],
        &[
            "job_group",
            "job_name",
            "description",
            "next_fire_time",
            "prev_fire_time",
            "priority",
            "trigger_state",
            "trigger_type",
            "start_time",
            "end_time",
            "calendar_name",
            "misfire_instr",
            "job_data:bytea",
        ],
    ]
    .concat();
    rows(conn, tables, "TRIGGERS", &columns, scheduler, |row| {
        let mut c = Cells::new(row, table);
        let key = key_of(&mut c)?;
        let positive = |v: Option<i64>| v.filter(|t| *t > 0);
        Ok(TriggerRow {
            job_group: c.string(2, "JOB_GROUP")?,
            job_name: c.string(3, "JOB_NAME")?,
            description: c.text(4)?,
            next_fire_time: positive(c.long(5, "NEXT_FIRE_TIME")?),
            prev_fire_time: positive(c.long(6, "PREV_FIRE_TIME")?),
            priority: c.int(7, "PRIORITY")?,
            state: c.string(8, "TRIGGER_STATE")?,
            kind: c.string(9, "TRIGGER_TYPE")?,
            start_time: c.long(10, "START_TIME")?.unwrap_or(0),
            end_time: positive(c.long(11, "END_TIME")?),
            calendar: c.text(12)?.filter(|n| !n.is_empty()),
            misfire_instruction: c.int(13, "MISFIRE_INSTR")?,
            data: c.blob(14, 15, "JOB_DATA", tables.max_blob)?,
            detail: details.remove(&key).unwrap_or(TriggerDetail::Missing),
            group: key.0,
            name: key.1,
        })
    })
    .await
}

async fn read_calendars(
    conn: &mut PgConnection,
    tables: &Tables,
    scheduler: &str,
) -> Result<Vec<CalendarRow>, SourceError> {
    let table = tables.table("CALENDARS");
    rows(
        conn,
        tables,
        "CALENDARS",
        &["calendar_name", "calendar:bytea"],
        scheduler,
        |row| {
            let mut c = Cells::new(row, table);
            let name = c.string(0, "CALENDAR_NAME")?;
            c.key = format!("calendar {name}");
            Ok(CalendarRow {
                blob: c.blob(1, 2, "CALENDAR", tables.max_blob)?,
                name,
            })
        },
    )
    .await
}

async fn read_paused_groups(
    conn: &mut PgConnection,
    tables: &Tables,
    scheduler: &str,
) -> Result<Vec<String>, SourceError> {
    let table = tables.table("PAUSED_TRIGGER_GRPS");
    rows(
        conn,
        tables,
        "PAUSED_TRIGGER_GRPS",
        &["trigger_group"],
        scheduler,
        |row| Cells::new(row, table).string(0, "TRIGGER_GROUP"),
    )
    .await
}

async fn read_fired(
    conn: &mut PgConnection,
    tables: &Tables,
    scheduler: &str,
) -> Result<Vec<FiredRow>, SourceError> {
    let table = tables.table("FIRED_TRIGGERS");
    let mut fired = rows(
        conn,
        tables,
        "FIRED_TRIGGERS",
        &[
            "entry_id",
            "trigger_group",
            "trigger_name",
            "instance_name",
            "fired_time",
            "sched_time",
            "priority",
            "state",
            "job_group",
            "job_name",
            "requests_recovery",
        ],
        scheduler,
        |row| {
            let mut c = Cells::new(row, table);
            let entry_id = c.string(0, "ENTRY_ID")?;
            c.key = format!("entry {entry_id}");
            Ok(FiredRow {
                trigger_group: c.string(1, "TRIGGER_GROUP")?,
                trigger_name: c.string(2, "TRIGGER_NAME")?,
                instance: c.string(3, "INSTANCE_NAME")?,
                fired_time: c.long(4, "FIRED_TIME")?.unwrap_or(0),
                sched_time: c.long(5, "SCHED_TIME")?.unwrap_or(0),
                priority: c.int(6, "PRIORITY")?.unwrap_or(5),
                state: c.string(7, "STATE")?,
                job_group: c.text(8)?,
                job_name: c.text(9)?,
                requests_recovery: c.boolean(10, "REQUESTS_RECOVERY")?.unwrap_or(false),
                entry_id,
            })
        },
    )
    .await?;
    fired.sort_by(|a, b| a.entry_id.cmp(&b.entry_id));
    Ok(fired)
}
