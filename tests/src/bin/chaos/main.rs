//! The chaos suite: proves under faults that nothing is lost or run twice.
//!
//! ```text
//! cargo run --release -p chime-tests --bin chaos -- --minutes 10 [--seed N] [--keep]
//! ```
//!
//! It runs its own PostgreSQL, starts 3 schedulers, 4 workers (two groups), 2 dependency
//! services and an API as processes, each reaching PostgreSQL and RabbitMQ through proxies of its
//! own, loads a mixed workload (`workload`), injects overlapping faults for the whole run
//! (`faults`: kill -9, SIGTERM, SIGSTOP for up to 90 s inside critical sections, partitions
//! from PostgreSQL or RabbitMQ, broker cuts, a slow PostgreSQL, PostgreSQL restarts, crashes and
//! one outage of over 20 s), then stops the faults, pauses the triggers, lets the system settle,
//! and checks the invariants (`invariants`). One summary line, then every violation in full; the
//! exit code is 1 if there was any. `--self-test` then breaks each invariant on purpose in the
//! run's own records and shows that the check reports it.

mod cluster;
mod faults;
mod invariants;
mod self_test;
mod workload;

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use chime_core::bus::Topology;
use tokio_util::sync::CancellationToken;

use crate::cluster::Cluster;

/// A small, seedable generator (xorshift64*): a run can be repeated with its seed.
pub struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.next() % (to - from).max(1))
    }
}

struct Args {
    minutes: f64,
    seed: u64,
    keep: bool,
    self_test: bool,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        minutes: 10.0,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        keep: false,
        self_test: false,
    };
    let mut given = std::env::args().skip(1);
    while let Some(arg) = given.next() {
        match arg.as_str() {
            "--minutes" => {
                args.minutes = given
                    .next()
                    .context("--minutes needs a number")?
                    .parse()
                    .context("--minutes needs a number")?;
            }
            "--seed" => {
                args.seed = given
                    .next()
                    .context("--seed needs a number")?
                    .parse()
                    .context("--seed needs a number")?;
            }
            "--keep" => args.keep = true,
            "--self-test" => args.self_test = true,
            "--help" | "-h" => {
                println!("chaos [--minutes M (default 10)] [--seed N] [--keep] [--self-test]");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (see --help)"),
        }
    }
    if !(0.5..=600.0).contains(&args.minutes) {
        bail!("--minutes must be between 0.5 and 600");
    }
    Ok(args)
}

fn main() -> ExitCode {
    // The services this suite starts are this same binary, run as `chime`.
    if std::env::var_os(cluster::AS_CHIME).is_some() {
        return chime_cli::main();
    }
    let args = match parse_args() {
        Ok(args) => args,
        Err(error) => {
            eprintln!("error: {error:#}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn say(started: Instant, what: &str) {
    eprintln!("chaos [{:>6.1}s] {what}", started.elapsed().as_secs_f64());
}

async fn run(args: Args) -> Result<bool> {
    let started = Instant::now();
    let mut rng = Rng::new(args.seed);
    let dir = chime_tests::scratch_dir("chaos")?;
    let log = dir.join("attempts.log");
    std::fs::write(&log, "")?;
    // Tasks append to it as the workers' unprivileged default user.
    std::fs::set_permissions(&log, std::os::unix::fs::PermissionsExt::from_mode(0o666))?;
    say(
        started,
        &format!("seed {}, directory {}", args.seed, dir.display()),
    );
    let mut cluster = Cluster::start(&dir).await?;
    let outcome = exercise(&mut cluster, &args, &mut rng, started, &log).await;
    if args.keep {
        // The database goes with its private server: a dump keeps it for the analysis.
        let dump = dir.join("chaos.dump");
        match cluster.pg.dump(&cluster.database, &dump).await {
            Ok(()) => say(
                started,
                &format!(
                    "kept {} (the database: pg_restore --create -d postgres {})",
                    dir.display(),
                    dump.display()
                ),
            ),
            Err(e) => say(started, &format!("kept {}; no dump: {e:#}", dir.display())),
        }
    }
    cluster.destroy().await;
    if !args.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    outcome
}

async fn exercise(
    cluster: &mut Cluster,
    args: &Args,
    rng: &mut Rng,
    started: Instant,
    log: &std::path::Path,
) -> Result<bool> {
    let topology = Topology::new(cluster.prefix.clone());
    wait_until(Duration::from_secs(60), "the services to start", || async {
        let online: i64 =
            sqlx::query_scalar("SELECT count(*) FROM workers WHERE status = 'online'")
                .fetch_one(cluster.store.pool())
                .await?;
        let api = chime_tests::http()
            .get(format!("{}/readyz", cluster.api_url))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        Ok(online >= 4 && api)
    })
    .await?;
    let (triggers, feed_ends) = workload::set_up(&cluster.store, log, rng, args.minutes).await?;
    say(
        started,
        &format!("{triggers} triggers, jobs and the diamond set up; faults begin"),
    );
    let activity = Arc::new(Mutex::new(workload::Activity::default()));
    let stop_load = CancellationToken::new();
    let load = tokio::spawn(workload::ad_hoc(
        cluster.api_url.clone(),
        cluster.amqp_url(),
        topology.clone(),
        cluster.store.clone(),
        log.to_path_buf(),
        activity.clone(),
        stop_load.clone(),
    ));

    let run_for = Duration::from_secs_f64(args.minutes * 60.0);
    let faults_started = Instant::now();
    let mut injector = faults::Injector::new();
    let mut outage_done = false;
    let mut next_fault = Instant::now();
    // The run lasts its minutes, and at least until the diamond's feed ends.
    while faults_started.elapsed() < run_for || jiff::Timestamp::now() < feed_ends {
        injector.tick(cluster, false).await?;
        let progress = faults_started.elapsed().as_secs_f64() / run_for.as_secs_f64();
        // One long outage, at a set point; every other fault at random, overlapping.
        if !outage_done && progress >= 0.45 && !injector.database_faulted() {
            outage_done = true;
            say(started, "PostgreSQL outage of 25 s");
            injector.outage(cluster, Duration::from_secs(25)).await?;
        } else if Instant::now() >= next_fault {
            // A fault that needs the database (to find a busy worker, to hold a scheduler
            // inside its transaction) may meet one that is away: it is skipped, not the run.
            match injector.inject(cluster, rng).await {
                Ok(what) => say(started, &what),
                Err(error) => say(
                    started,
                    &format!("(a fault could not be injected: {error:#})"),
                ),
            }
            next_fault = Instant::now() + rng.millis(1500, 5000);
        }
        let revived = cluster.revive()?;
        if !revived.is_empty() {
            say(
                started,
                &format!("started again after exiting: {revived:?}"),
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    injector.tick(cluster, true).await?;
    let faults = injector.ledger;
    say(
        started,
        &format!("faults stop ({} in all); settling", faults.records.len()),
    );
    stop_load.cancel();
    match load.await {
        Ok(Err(error)) => say(started, &format!("the ad-hoc load stopped: {error:#}")),
        Err(error) => say(started, &format!("the ad-hoc load panicked: {error}")),
        Ok(Ok(())) => {}
    }
    cluster.revive()?;
    sqlx::query("INSERT INTO paused_trigger_groups (group_name) VALUES ($1)")
        .bind(workload::CHAOS_GROUP)
        .execute(cluster.store.pool())
        .await?;
    let paused_at: jiff_sqlx::Timestamp = sqlx::query_scalar("SELECT now()")
        .fetch_one(cluster.store.pool())
        .await?;
    let settled = wait_until(Duration::from_secs(300), "the system to settle", || async {
        let live: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM tasks WHERE status IN ('waiting', 'ready', 'running', 'retrying')",
        )
        .fetch_one(cluster.store.pool())
        .await?;
        let unsent = chime_core::store::outbox::unsent_count(&cluster.store).await?;
        Ok(live == 0 && unsent == 0)
    })
    .await;
    if let Err(error) = settled {
        say(started, &format!("{error:#}; checking anyway"));
    }
    let dead_letters = chime_tests::dead_letter_bodies_at(&cluster.amqp_url(), &topology).await?;
    let submitted = activity
        .lock()
        .map(|a| a.submitted.clone())
        .unwrap_or_default();
    let kills = activity.lock().map(|a| a.kills).unwrap_or_default();
    let poison = activity.lock().map(|a| a.poison).unwrap_or_default();
    let store = cluster.store.clone();
    let evidence = invariants::Evidence {
        store: &store,
        log,
        paused_at: paused_at.to_jiff(),
        submitted: &submitted,
        dead_letters: &dead_letters,
        poison,
        faults: &faults,
    };
    let (totals, violations) = invariants::check(&evidence).await?;
    let counts: Vec<String> = faults
        .counts()
        .iter()
        .map(|(kind, n)| format!("{kind}={n}"))
        .collect();
    println!(
        "chaos minutes={:.1} seed={} faults={} {} fires={} fires_late_max_ms={} tasks={} \
         start_delay_ms(p50,p90,max)={},{},{} attempts_executed={} lost_expected={} \
         submitted={} kills={} violations={}",
        args.minutes,
        args.seed,
        faults.records.len(),
        counts.join(" "),
        totals.fires,
        totals.latest_fire_ms,
        totals.tasks,
        totals.start_delay_ms(0.5),
        totals.start_delay_ms(0.9),
        totals.start_delay_ms(1.0),
        totals.executed,
        totals.lost,
        submitted.len(),
        kills,
        violations.len()
    );
    for violation in &violations {
        println!("violation: {violation}");
    }
    let mut self_tested = true;
    if args.self_test {
        // With nothing running, a broken record stays as the case made it.
        cluster.stop_services().await;
        let (lines, all) = self_test::run(&evidence).await?;
        for line in lines {
            println!("{line}");
        }
        self_tested = all;
    }
    // The invariants, as a test runner's closing line.
    // By invariant: a violation's sub-check (`3e`) belongs to its number.
    let broken: std::collections::BTreeSet<&str> = violations
        .iter()
        .filter_map(|v| v.split(':').next())
        .map(|id| id.trim_end_matches(|c: char| c.is_ascii_alphabetic()))
        .collect();
    println!(
        "chaos: {} passed, {} failed",
        invariants::COUNT - broken.len().min(invariants::COUNT),
        broken.len()
    );
    Ok(violations.is_empty() && self_tested)
}

/// Polls `check` every 200 ms until it holds, for up to `limit`.
async fn wait_until<F, Fut>(limit: Duration, what: &str, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(true) = check().await {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
