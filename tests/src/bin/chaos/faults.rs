//! The faults the suite injects, and the ledger of what it did to whom and when.
//!
//! Faults overlap: a pause, a partition, a slow database or an outage lasts a while and ends on
//! its own time ([`Injector::tick`]) while others begin. Kinds:
//!
//! - `kill9`, `sigterm` of a random process (started again after);
//! - `pause`: SIGSTOP of a process for 5–90 s, timed into a critical section half the time (a
//!   worker that runs attempts; a scheduler inside its firing transaction, held there by a table
//!   lock until it is frozen), with its database sessions ended during the pause half the time;
//! - `pg_partition`, `amqp_partition`: one process cut off from PostgreSQL or RabbitMQ, packets
//!   dropped (its proxy stops forwarding, closes nothing);
//! - `broker_cut`: every connection to RabbitMQ closed, new ones refused, for 1–6 s;
//! - `pg_slow`: 30–150 ms more on every chunk to and from PostgreSQL, for 10–20 s;
//! - `pg_slow_past_lease`: 450–900 ms more each way, past a worker's default lease budget, for
//!   8–15 s (a worker lengthens its lease instead of losing its attempts);
//! - `pg_restart` (`-m fast`), `pg_crash` (`-m immediate`: crash recovery), `pg_kill9` (kill -9
//!   of the postmaster), `pg_outage` (25 s down);
//! - `tree_pause`: a worker frozen with its whole tree (guard and commands), as `docker pause`
//!   does, for 5–30 s;
//! - `guard_kill9`: kill -9 of a worker's guard (the worker must end its attempts and stop);
//! - `pg_refusal`: one process's connections to PostgreSQL closed and refused for 3–20 s while
//!   PostgreSQL serves everyone else (a firewall REJECT, a proxy restarting);
//! - `kill9_frozen`: kill -9 of a process that is frozen; `kill9_slow`: kill -9 of a process
//!   while PostgreSQL is slow;
//! - `rabbit_restart`: the RabbitMQ node killed with -9 and started again on its own data (at most
//!   once every 45 s).
//!
//! No more than two processes are frozen, and no more than two partitioned, at once; and at least
//! one scheduler is always free of both, so that fires have someone to make them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Result;
use jiff::Timestamp;

use crate::Rng;
use crate::cluster::Cluster;

/// What was done, to whom, from when to when (wall clock, as the database's on this machine).
#[derive(Debug, Clone)]
pub struct Record {
    /// The kind (see the module's list).
    pub kind: &'static str,
    /// The process it hit (its pid), if it hit one.
    pub pid: Option<u32>,
    /// The service it hit (`worker-3`), if it hit one.
    pub service: Option<String>,
    /// When it began.
    pub from: Timestamp,
    /// When it ended (its beginning, for an instant fault).
    pub to: Timestamp,
    /// For a freeze aimed inside a scheduler's firing transaction: whether it landed there (the
    /// scheduler was seen waiting inside it when it was frozen).
    pub landed: Option<bool>,
}

/// Every fault of the run.
#[derive(Debug, Default)]
pub struct Ledger {
    /// In order of their start.
    pub records: Vec<Record>,
}

impl Ledger {
    /// How many of each kind; freezes aimed inside a firing transaction as
    /// `pause_in_fire_landed` and `pause_in_fire_missed` besides.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for record in &self.records {
            *counts.entry(record.kind).or_default() += 1;
            match record.landed {
                Some(true) => *counts.entry("pause_in_fire_landed").or_default() += 1,
                Some(false) => *counts.entry("pause_in_fire_missed").or_default() += 1,
                None => {}
            }
        }
        counts
    }

    /// Whether a fault aimed at process `pid` (killed, terminated, frozen, cut off from
    /// PostgreSQL) overlapped `[from, to]`, with `slack_ms` either side.
    pub fn process_faulted(&self, pid: u32, from: Timestamp, to: Timestamp, slack_ms: i64) -> bool {
        let slack = jiff::SignedDuration::from_millis(slack_ms);
        self.records.iter().any(|r| {
            r.pid == Some(pid)
                && matches!(
                    r.kind,
                    "kill9"
                        | "sigterm"
                        | "pause"
                        | "pg_partition"
                        | "tree_pause"
                        | "guard_kill9"
                        | "pg_refusal"
                        | "kill9_frozen"
                        | "kill9_slow"
                )
                && r.from - slack <= to
                && from <= r.to + slack
        })
    }

    /// The windows in which RabbitMQ was away for everyone (cut or restarted).
    pub fn broker_windows(&self) -> Vec<(Timestamp, Timestamp)> {
        self.records
            .iter()
            .filter(|r| matches!(r.kind, "broker_cut" | "rabbit_restart"))
            .map(|r| (r.from, r.to))
            .collect()
    }

    /// The windows in which PostgreSQL was cut off from process `pid` alone, or refused it.
    pub fn own_database_windows(&self, pid: u32) -> Vec<(Timestamp, Timestamp)> {
        self.records
            .iter()
            .filter(|r| r.pid == Some(pid) && matches!(r.kind, "pg_partition" | "pg_refusal"))
            .map(|r| (r.from, r.to))
            .collect()
    }

    /// The windows in which PostgreSQL was down or slow for everyone.
    pub fn database_windows(&self) -> Vec<(Timestamp, Timestamp)> {
        self.records
            .iter()
            .filter(|r| {
                r.kind.starts_with("pg_") && !matches!(r.kind, "pg_partition" | "pg_refusal")
            })
            .map(|r| (r.from, r.to))
            .collect()
    }
}

/// How a lasting fault ends.
#[derive(Debug, Clone)]
enum Undo {
    Thaw(usize),
    /// A service and the rest of its tree (pids, its guard first).
    ThawTree(usize, Vec<u32>),
    Heal(usize),
    Broker,
    PostgresUp,
    PostgresFast,
}

struct Lasting {
    until: Instant,
    record: usize,
    undo: Undo,
}

/// Injects faults into a cluster and keeps the ledger.
pub struct Injector {
    /// What it did.
    pub ledger: Ledger,
    lasting: Vec<Lasting>,
    last_rabbit_restart: Option<Instant>,
}

impl Injector {
    /// An injector that has done nothing yet.
    pub fn new() -> Self {
        Self {
            ledger: Ledger::default(),
            lasting: Vec::new(),
            last_rabbit_restart: None,
        }
    }

    fn begin(&mut self, kind: &'static str, cluster: &Cluster, target: Option<usize>) -> usize {
        let now = Timestamp::now();
        self.ledger.records.push(Record {
            kind,
            pid: target.and_then(|i| cluster.pid(i)),
            service: target.map(|i| cluster.name(i).to_string()),
            from: now,
            to: now,
            landed: None,
        });
        self.ledger.records.len() - 1
    }

    fn last(&mut self, record: usize, lasting: Duration, undo: Undo) {
        self.lasting.push(Lasting {
            until: Instant::now() + lasting,
            record,
            undo,
        });
    }

    fn active(&self, pick: impl Fn(&Undo) -> bool) -> Vec<Undo> {
        self.lasting
            .iter()
            .map(|l| &l.undo)
            .filter(|u| pick(u))
            .cloned()
            .collect()
    }

    /// Processes frozen now (alone or with their tree).
    fn frozen(&self) -> Vec<usize> {
        self.lasting
            .iter()
            .filter_map(|l| match l.undo {
                Undo::Thaw(i) | Undo::ThawTree(i, _) => Some(i),
                _ => None,
            })
            .collect()
    }

    /// Whether the database is down or slowed now.
    fn database_busy(&self) -> bool {
        !self
            .active(|u| matches!(u, Undo::PostgresUp | Undo::PostgresFast))
            .is_empty()
    }

    /// Processes frozen or partitioned now.
    fn hobbled(&self) -> Vec<usize> {
        self.lasting
            .iter()
            .filter_map(|l| match l.undo {
                Undo::Thaw(i) | Undo::ThawTree(i, _) | Undo::Heal(i) => Some(i),
                _ => None,
            })
            .collect()
    }

    /// Ends the lasting faults whose time is up (all of them with `all`).
    pub async fn tick(&mut self, cluster: &mut Cluster, all: bool) -> Result<()> {
        let now = Instant::now();
        let (due, keep): (Vec<Lasting>, Vec<Lasting>) = std::mem::take(&mut self.lasting)
            .into_iter()
            .partition(|l| all || l.until <= now);
        self.lasting = keep;
        for lasting in due {
            match lasting.undo {
                Undo::Thaw(i) => cluster.freeze(i, false),
                // The guard first (its list begins with it), the rest a moment later: a guard
                // whose deadline passed kills the commands before they run on beside a re-run.
                Undo::ThawTree(_, pids) => {
                    let (guard, rest) = pids.split_at(pids.len().min(1));
                    Cluster::freeze_pids(guard, false);
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    Cluster::freeze_pids(rest, false);
                }
                Undo::Heal(i) => cluster.heal(i),
                Undo::Broker => cluster.cut_broker(false),
                Undo::PostgresUp => cluster.pg.resume().await?,
                Undo::PostgresFast => cluster.slow_postgres(None),
            }
            self.ledger.records[lasting.record].to = Timestamp::now();
        }
        Ok(())
    }

    /// Injects one fault of a random kind; returns what it did, to say.
    pub async fn inject(&mut self, cluster: &mut Cluster, rng: &mut Rng) -> Result<String> {
        let hobbled = self.hobbled();
        let schedulers = cluster.of_kind("scheduler");
        let free_schedulers = schedulers.iter().filter(|i| !hobbled.contains(i)).count();
        // A victim that is neither frozen nor partitioned, and not the last free scheduler.
        let pick = |rng: &mut Rng, among: &[usize]| -> Option<usize> {
            let fit: Vec<usize> = among
                .iter()
                .copied()
                .filter(|i| !hobbled.contains(i))
                .filter(|i| !schedulers.contains(i) || free_schedulers > 1)
                .collect();
            (!fit.is_empty()).then(|| fit[rng.below(fit.len())])
        };
        let everyone: Vec<usize> = (0..cluster.len()).collect();
        let frozen = self.frozen().len();
        let partitioned = self.active(|u| matches!(u, Undo::Heal(_))).len();
        match rng.below(27) {
            0..=2 => {
                let victim = rng.below(cluster.len());
                if hobbled.contains(&victim) {
                    return Ok("(skipped: the victim is frozen or partitioned)".into());
                }
                self.begin("kill9", cluster, Some(victim));
                cluster.kill9(victim, rng.millis(500, 3000)).await;
                Ok(format!("kill -9 {}", cluster.name(victim)))
            }
            3..=4 => {
                let victim = rng.below(cluster.len());
                if hobbled.contains(&victim) {
                    return Ok("(skipped: the victim is frozen or partitioned)".into());
                }
                // A service stopping while the database is away waits for it (up to the 20 s
                // `terminate` allows), and the fault loop, which ends the outage, would wait too.
                if self.database_busy() {
                    return Ok("(skipped: the database is away or slow)".into());
                }
                let record = self.begin("sigterm", cluster, Some(victim));
                cluster.terminate(victim).await?;
                self.ledger.records[record].to = Timestamp::now();
                Ok(format!("SIGTERM {}", cluster.name(victim)))
            }
            5..=6 => {
                if !self.active(|u| matches!(u, Undo::Broker)).is_empty() {
                    return Ok("(skipped: the broker is cut already)".into());
                }
                let lasting = rng.millis(1000, 6000);
                let record = self.begin("broker_cut", cluster, None);
                cluster.cut_broker(true);
                self.last(record, lasting, Undo::Broker);
                Ok(format!("broker connections cut for {lasting:?}"))
            }
            7..=11 if frozen < 2 => self.pause(cluster, rng, &pick).await,
            12..=15 if partitioned < 2 => {
                let from_postgres = rng.below(2) == 0;
                let Some(victim) = pick(rng, &everyone) else {
                    return Ok("(skipped: nobody to partition)".into());
                };
                let lasting = rng.millis(5000, 30_000);
                let kind = if from_postgres {
                    "pg_partition"
                } else {
                    "amqp_partition"
                };
                let record = self.begin(kind, cluster, Some(victim));
                cluster.partition(victim, from_postgres);
                self.last(record, lasting, Undo::Heal(victim));
                Ok(format!(
                    "{} cut off from {} for {lasting:?} (packets dropped)",
                    cluster.name(victim),
                    if from_postgres {
                        "PostgreSQL"
                    } else {
                        "RabbitMQ"
                    }
                ))
            }
            // The proxies have one mode: a slow period would end a partition or refusal early.
            16..=17 if !self.database_busy() && partitioned == 0 => {
                let by = rng.millis(30, 150);
                let lasting = rng.millis(10_000, 20_000);
                let record = self.begin("pg_slow", cluster, None);
                cluster.slow_postgres(Some(by));
                self.last(record, lasting, Undo::PostgresFast);
                Ok(format!("PostgreSQL {by:?} slower each way for {lasting:?}"))
            }
            18..=19 if !self.database_busy() => {
                let (kind, what) = match rng.below(3) {
                    0 => ("pg_restart", "PostgreSQL restart (-m fast)"),
                    1 => ("pg_crash", "PostgreSQL crash (-m immediate)"),
                    _ => ("pg_kill9", "kill -9 of the postmaster"),
                };
                let record = self.begin(kind, cluster, None);
                match kind {
                    "pg_restart" => cluster.pg.stop().await?,
                    "pg_crash" => cluster.pg.crash().await?,
                    _ => cluster.pg.kill_postmaster().await?,
                }
                cluster.pg.resume().await?;
                self.ledger.records[record].to = Timestamp::now();
                Ok(what.into())
            }
            20 if self
                .last_rabbit_restart
                .is_none_or(|at| at.elapsed() > Duration::from_secs(45)) =>
            {
                let record = self.begin("rabbit_restart", cluster, None);
                cluster.rabbit.restart().await?;
                self.ledger.records[record].to = Timestamp::now();
                self.last_rabbit_restart = Some(Instant::now());
                Ok("RabbitMQ node killed with -9 and started again".into())
            }
            21 if frozen < 2 => self.pause_tree(cluster, rng, &pick).await,
            22 => {
                let Some(victim) = pick(rng, &cluster.of_kind("worker")) else {
                    return Ok("(skipped: no free worker)".into());
                };
                let Some(guard) = cluster.guard(victim) else {
                    return Ok("(skipped: its guard was not found)".into());
                };
                self.begin("guard_kill9", cluster, Some(victim));
                if let Ok(guard) = i32::try_from(guard) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(guard),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                Ok(format!("kill -9 of {}'s guard", cluster.name(victim)))
            }
            23 if partitioned < 2 => {
                let Some(victim) = pick(rng, &everyone) else {
                    return Ok("(skipped: nobody to refuse)".into());
                };
                let lasting = rng.millis(3000, 20_000);
                let record = self.begin("pg_refusal", cluster, Some(victim));
                cluster.refuse_postgres(victim);
                self.last(record, lasting, Undo::Heal(victim));
                Ok(format!(
                    "PostgreSQL refuses {} alone for {lasting:?}",
                    cluster.name(victim)
                ))
            }
            24 if !self.database_busy() && partitioned == 0 => {
                let by = rng.millis(450, 900);
                let lasting = rng.millis(8000, 15_000);
                let record = self.begin("pg_slow_past_lease", cluster, None);
                cluster.slow_postgres(Some(by));
                self.last(record, lasting, Undo::PostgresFast);
                Ok(format!(
                    "PostgreSQL {by:?} slower each way (past the lease budget) for {lasting:?}"
                ))
            }
            25 => {
                // Alone-frozen processes only: a whole tree is killed whole (docker kill), which
                // kill -9 of its worker is not.
                let frozen: Vec<usize> = self
                    .lasting
                    .iter()
                    .filter_map(|l| match l.undo {
                        Undo::Thaw(i) => Some(i),
                        _ => None,
                    })
                    .collect();
                if frozen.is_empty() {
                    return Ok("(skipped: nobody is frozen)".into());
                }
                let victim = frozen[rng.below(frozen.len())];
                self.begin("kill9_frozen", cluster, Some(victim));
                cluster.kill9(victim, rng.millis(500, 3000)).await;
                Ok(format!("kill -9 of {} while frozen", cluster.name(victim)))
            }
            26 if !self.active(|u| matches!(u, Undo::PostgresFast)).is_empty() => {
                let victim = rng.below(cluster.len());
                if hobbled.contains(&victim) {
                    return Ok("(skipped: the victim is frozen or partitioned)".into());
                }
                self.begin("kill9_slow", cluster, Some(victim));
                cluster.kill9(victim, rng.millis(500, 3000)).await;
                Ok(format!(
                    "kill -9 {} while PostgreSQL is slow",
                    cluster.name(victim)
                ))
            }
            _ => Ok("(no fault this time)".into()),
        }
    }

    /// A worker that runs attempts frozen with its whole tree (itself, its commands, its guard)
    /// for 5–30 s, as `docker pause` freezes a container.
    async fn pause_tree(
        &mut self,
        cluster: &mut Cluster,
        rng: &mut Rng,
        pick: &dyn Fn(&mut Rng, &[usize]) -> Option<usize>,
    ) -> Result<String> {
        if self.database_busy() {
            return Ok("(skipped: the database is away or slow)".into());
        }
        let Some(victim) = pick(rng, &busy_workers(cluster).await?) else {
            return Ok("(skipped: no free worker runs attempts)".into());
        };
        let lasting = rng.millis(5000, 30_000);
        let record = self.begin("tree_pause", cluster, Some(victim));
        // The worker first, so it sees nothing of the rest stopping and starts nothing more
        // while its tree is listed; then the rest, listed again until nothing new appears.
        cluster.freeze(victim, true);
        let mut tree = Vec::new();
        loop {
            let found: Vec<u32> = cluster
                .tree(victim)
                .into_iter()
                .filter(|pid| !tree.contains(pid))
                .collect();
            if found.is_empty() {
                break;
            }
            Cluster::freeze_pids(&found, true);
            tree.extend(found);
        }
        // Thawed guard first (see `tick`).
        if let Some(guard) = cluster.guard(victim)
            && let Some(at) = tree.iter().position(|pid| *pid == guard)
        {
            tree.remove(at);
            tree.insert(0, guard);
        }
        let size = tree.len();
        self.last(record, lasting, Undo::ThawTree(victim, tree));
        Ok(format!(
            "SIGSTOP of {} with its tree ({size} processes) for {lasting:?}",
            cluster.name(victim)
        ))
    }

    /// A PostgreSQL outage of `lasting` (ends on its own).
    pub async fn outage(&mut self, cluster: &mut Cluster, lasting: Duration) -> Result<()> {
        let record = self.begin("pg_outage", cluster, None);
        cluster.pg.stop().await?;
        self.last(record, lasting, Undo::PostgresUp);
        Ok(())
    }

    /// Whether an outage or a slow database is under way.
    pub fn database_faulted(&self) -> bool {
        self.database_busy()
    }

    async fn pause(
        &mut self,
        cluster: &mut Cluster,
        rng: &mut Rng,
        pick: &dyn Fn(&mut Rng, &[usize]) -> Option<usize>,
    ) -> Result<String> {
        // Mostly short, sometimes up to 90 s.
        let lasting = if rng.below(4) == 0 {
            rng.millis(30_000, 90_000)
        } else {
            rng.millis(5000, 30_000)
        };
        let end_sessions = rng.below(2) == 0;
        let critical = rng.below(2) == 0;
        let (victim, section) = match (critical, rng.below(2)) {
            // Finding a busy worker asks the database; while it is away that question would
            // hold the fault loop, and with it the end of the outage.
            (true, 0) if self.database_busy() => {
                return Ok("(skipped: the database is away or slow)".into());
            }
            (true, 0) => match pick(rng, &busy_workers(cluster).await?) {
                Some(victim) => (victim, "while it runs attempts"),
                None => return Ok("(skipped: no free worker runs attempts)".into()),
            },
            (true, _) if self.database_busy() => {
                return Ok("(skipped: the database is away or slow)".into());
            }
            (true, _) => match pick(rng, &cluster.of_kind("scheduler")) {
                Some(victim) => (victim, "inside its firing transaction"),
                None => return Ok("(skipped: no scheduler to freeze)".into()),
            },
            _ => match pick(rng, &(0..cluster.len()).collect::<Vec<_>>()) {
                Some(victim) => (victim, "anywhere"),
                None => return Ok("(skipped: nobody to freeze)".into()),
            },
        };
        let record = self.begin("pause", cluster, Some(victim));
        if section == "inside its firing transaction" {
            self.ledger.records[record].landed = Some(freeze_inside_fire(cluster, victim).await);
        } else {
            cluster.freeze(victim, true);
        }
        self.last(record, lasting, Undo::Thaw(victim));
        if end_sessions {
            tokio::time::sleep(Duration::from_millis(500)).await;
            end_sessions_of(cluster, victim).await;
        }
        Ok(format!(
            "SIGSTOP {} {section} for {lasting:?}{}",
            cluster.name(victim),
            if end_sessions {
                ", its database sessions ended"
            } else {
                ""
            }
        ))
    }
}

/// The workers that run attempts now (none if the database does not answer within two seconds:
/// the fault loop, which also ends the faults under way, must not wait on it).
async fn busy_workers(cluster: &Cluster) -> Result<Vec<usize>> {
    let asked = sqlx::query_scalar(
        "SELECT DISTINCT w.pid FROM tasks t JOIN workers w ON w.id = t.worker_id
         WHERE t.status = 'running' AND w.status = 'online'",
    )
    .fetch_all(cluster.store.pool());
    let pids: Vec<i32> = tokio::time::timeout(Duration::from_secs(2), asked)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    Ok(cluster
        .of_kind("worker")
        .into_iter()
        .filter(|i| cluster.pid(*i).is_some_and(|p| pids.contains(&(p as i32))))
        .collect())
}

/// Freezes scheduler `victim` inside its firing transaction: every insert of a fire is held by a
/// table lock until the victim waits on it (its trigger rows locked), then it is frozen and the
/// lock let go. If it does not come within 3 s, or the database does not answer, it is frozen
/// wherever it is. Returns whether it was seen waiting inside the transaction.
async fn freeze_inside_fire(cluster: &Cluster, victim: usize) -> bool {
    let name = format!("chime[{}]", cluster.pid(victim).unwrap_or(0));
    let held = async {
        let mut blocker = cluster.store.pool().begin().await?;
        sqlx::query("LOCK TABLE fired_triggers IN EXCLUSIVE MODE")
            .execute(&mut *blocker)
            .await?;
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut inside = false;
        while Instant::now() < deadline {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE application_name = $1 AND wait_event_type = 'Lock'",
            )
            .bind(&name)
            .fetch_one(cluster.store.pool())
            .await?;
            if waiting > 0 {
                inside = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        anyhow::Ok((blocker, inside))
    };
    let held = tokio::time::timeout(Duration::from_secs(5), held).await;
    cluster.freeze(victim, true);
    match held {
        Ok(Ok((blocker, inside))) => {
            let _ = blocker.commit().await;
            inside
        }
        _ => false,
    }
}

/// Ends every database session of a service's process.
async fn end_sessions_of(cluster: &Cluster, victim: usize) {
    let Some(pid) = cluster.pid(victim) else {
        return;
    };
    let ended = sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
    )
    .bind(format!("chime[{pid}]"))
    .execute(cluster.store.pool());
    // Bounded: while the database is away the fault loop must go on (it ends the outage).
    let _ = tokio::time::timeout(Duration::from_secs(2), ended).await;
}
