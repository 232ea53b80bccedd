//! chime-scheduler: the trigger-firing service. Any number of instances, no leader.
//!
//! - [`fire`]: where triggers are fired (one transaction per round);
//! - [`recovery`]: where attempts of dead workers are recovered and lost task messages
//!   re-published (the database is the truth of what must run);
//! - [`webhooks`]: where failure notifications are POSTed;
//! - this file: an instance's lifetime — register, check in, fire (and release due retries) in a
//!   loop woken by the nearest due trigger, a NOTIFY (a trigger created or resumed) or the poll
//!   backstop, and leave.

pub mod fire;
pub mod gauges;
pub mod recovery;
pub mod retention;
pub mod webhooks;

use std::time::Duration;

use chime_core::Node;
use chime_core::bus::Topology;
use chime_core::store::services::CheckIn;
use chime_core::store::{Store, StoreError, notify, task_lifecycle};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

pub use fire::FiringSettings;

/// How a scheduler instance behaves.
#[derive(Debug, Clone)]
pub struct SchedulerSettings {
    /// The firing loop's settings.
    pub firing: FiringSettings,
    /// How often the instance records that it is alive.
    pub checkin_interval: Duration,
    /// The longest sleep between rounds when nothing wakes the loop.
    pub poll: Duration,
    /// A ready task not started for this long, whose queue (process or inline) is empty, is
    /// re-published.
    pub republish_after: Duration,
    /// History older than this is pruned; None keeps it for ever.
    pub retention: Option<Duration>,
}

impl SchedulerSettings {
    /// The settings a configuration gives.
    pub fn from_config(config: &chime_core::config::SchedulerConfig) -> Self {
        Self {
            firing: FiringSettings {
                lookahead: Duration::from_millis(config.lookahead_ms),
                batch: config.batch,
                misfire_threshold: Duration::from_millis(config.misfire_threshold_ms),
            },
            checkin_interval: Duration::from_millis(config.checkin_interval_ms),
            republish_after: Duration::from_millis(config.republish_after_ms),
            retention: (config.retention_days > 0)
                .then(|| Duration::from_secs(u64::from(config.retention_days) * 86_400)),
            ..Self::default()
        }
    }
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        Self {
            firing: FiringSettings {
                lookahead: Duration::from_millis(1500),
                batch: 1000,
                misfire_threshold: Duration::from_secs(60),
            },
            checkin_interval: Duration::from_secs(2),
            poll: Duration::from_secs(1),
            republish_after: Duration::from_secs(60),
            retention: Some(Duration::from_secs(30 * 86_400)),
        }
    }
}

/// Runs one scheduler instance on `node` until `shutdown`.
pub async fn run(
    node: &Node,
    settings: SchedulerSettings,
    shutdown: CancellationToken,
) -> Result<(), StoreError> {
    let instance_id = chime_core::store::services::instance_id();
    let check_in = CheckIn::start(
        &node.store,
        "scheduler",
        instance_id.clone(),
        settings.checkin_interval,
    )
    .await?;
    let groups: Vec<String> = chime_core::store::worker_groups::list(&node.store)
        .await?
        .into_iter()
        .map(|g| g.name)
        .collect();
    chime_core::telemetry::catalog::register_at_zero(
        chime_core::telemetry::catalog::Role::Scheduler,
        &groups,
        &[],
    );
    let span = info_span!("scheduler", instance = %instance_id);
    async {
        info!("scheduler instance started");
        let checkins = tokio::spawn(check_in.run(shutdown.clone()));
        let recovery = tokio::spawn(recovery::run(
            node.store.clone(),
            node.broker.clone(),
            settings.republish_after,
            shutdown.clone(),
        ));
        let retention = tokio::spawn(retention::run(
            node.store.clone(),
            settings.retention,
            shutdown.clone(),
        ));
        let gauges = tokio::spawn(gauges::run(
            node.store.clone(),
            node.broker.clone(),
            shutdown.clone(),
        ));
        let webhooks = tokio::spawn(webhooks::run(node.store.clone(), shutdown.clone()));
        let windows = tokio::spawn(webhooks::check_windows(
            node.store.clone(),
            shutdown.clone(),
        ));
        firing_loop(
            &node.store,
            node.topology(),
            &instance_id,
            &settings,
            &shutdown,
        )
        .await;
        let _ = checkins.await;
        let _ = recovery.await;
        let _ = retention.await;
        let _ = gauges.await;
        let _ = webhooks.await;
        let _ = windows.await;
        info!("scheduler instance stopped");
    }
    .instrument(span)
    .await;
    Ok(())
}

async fn firing_loop(
    store: &Store,
    topology: &Topology,
    instance_id: &str,
    settings: &SchedulerSettings,
    shutdown: &CancellationToken,
) {
    let mut listener = notify::Listener::open(store, &store.triggers_channel()).await;
    while !shutdown.is_cancelled() {
        // A round waits on the database (up to the pool's timeout per step while it is away);
        // a stopping scheduler does not wait for it. A round cut short rolls back: a fire is
        // made whole in its transaction or not at all.
        let sleep = tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            sleep = firing_round(store, topology, instance_id, settings) => sleep,
        };
        if sleep.is_zero() {
            continue;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(sleep) => {}
            _ = listener.notified() => {}
        }
    }
}

/// One round: due retries released, free triggers unblocked, due triggers fired. Returns how
/// long to sleep before the next: until the next trigger enters the lookahead window or a retry
/// is due (a NOTIFY may come first), the poll, or nothing when a full batch says more is due.
async fn firing_round(
    store: &Store,
    topology: &Topology,
    instance_id: &str,
    settings: &SchedulerSettings,
) -> Duration {
    let started = std::time::Instant::now();
    // Retries whose time has come go out like one-shot fires, through the outbox.
    match task_lifecycle::release_due_retries(store, topology, settings.firing.batch).await {
        Ok(0) => {}
        Ok(released) => {
            metrics::counter!("chime_scheduler_retries_released_total").increment(released as u64);
        }
        Err(error) => warn!(%error, "releasing retries failed"),
    }
    match fire::unblock_free_triggers(store).await {
        Ok(0) => {}
        Ok(unblocked) => {
            debug!(unblocked, "unblocked triggers of jobs that are free again");
            metrics::counter!("chime_scheduler_triggers_unblocked_total").increment(unblocked);
        }
        Err(error) => warn!(%error, "unblocking triggers failed"),
    }
    match fire::fire_due(store, topology, instance_id, &settings.firing).await {
        Ok(round) => {
            metrics::counter!("chime_scheduler_fires_total").increment(round.fired);
            metrics::histogram!("chime_scheduler_round_seconds").record(started.elapsed());
            if round.fired > 0 {
                debug!(fired = round.fired, acquired = round.acquired, "fired");
            }
            if round.acquired as i64 >= settings.firing.batch {
                return Duration::ZERO;
            }
        }
        Err(error) => {
            warn!(%error, "firing round failed");
            return settings.poll;
        }
    }
    match fire::until_next_work(store, settings.firing.lookahead).await {
        Ok(Some(until)) => until.min(settings.poll),
        Ok(None) => settings.poll,
        Err(error) => {
            warn!(%error, "cannot find the next due trigger");
            settings.poll
        }
    }
}
