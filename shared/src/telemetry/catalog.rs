//! Every metric chime records, with its help text and unit: one list, so `/metrics` explains
//! itself (`# HELP` lines) and a reader finds here what each name means and where it comes from.
//! Durations are seconds and histograms; counters end in `_total`; `worker_group` and `kind`
//! label what belongs to a worker group or a job kind.

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

/// Histogram buckets for durations in seconds: from a millisecond to ten minutes.
pub const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0,
];

/// Registers the help text and unit of every metric with the installed recorder.
pub fn describe() {
    // Scheduler: firing.
    describe_histogram!(
        "chime_fire_lag_seconds",
        Unit::Seconds,
        "How late a trigger fire reached the broker: from its scheduled time to the broker's \
         confirm of its task message, by worker group (recorded by the outbox relay)."
    );
    describe_counter!(
        "chime_scheduler_fires_total",
        "Trigger fires recorded (a fired_triggers row and a task each)."
    );
    describe_counter!(
        "chime_scheduler_misfires_total",
        "Triggers found late past the misfire threshold, by the misfire policy applied."
    );
    describe_histogram!(
        "chime_scheduler_round_seconds",
        Unit::Seconds,
        "Duration of one firing round (acquire due triggers, fire, advance)."
    );
    describe_counter!(
        "chime_scheduler_retries_released_total",
        "Retrying tasks whose retry time came, made ready again."
    );
    describe_counter!(
        "chime_scheduler_triggers_unblocked_total",
        "Triggers of one-at-a-time jobs unblocked after their job's task ended."
    );
    describe_gauge!(
        "chime_job_last_success_timestamp_seconds",
        Unit::Seconds,
        "When each job's newest succeeded run ended (seconds since the epoch; 0: never), by job \
         (group.name): alert on time() minus it (scheduler, every 15 s)."
    );
    describe_counter!(
        "chime_jobs_success_overdue_total",
        "Jobs found past their success window (expect_success_within_ms), once per missed \
         deadline; each is notified to the job's webhooks and the global ones."
    );
    describe_counter!(
        "chime_job_tasks_finished_total",
        "Tasks of jobs that ended, by job (group.name) and outcome (succeeded, failed, killed), \
         counted by the dependency service that handled the end's event: sum across instances."
    );
    describe_counter!(
        "chime_webhook_deliveries_total",
        "Webhook POSTs by a scheduler instance, by outcome (delivered, failed: tried again \
         later, gave_up: the delivery's last try failed)."
    );
    describe_gauge!(
        "chime_webhook_deliveries_in_flight",
        "Webhook deliveries a scheduler instance has in flight (at most 32, 2 per webhook)."
    );
    describe_counter!(
        "chime_service_checkins_total",
        "Check-ins of this process's service instances (scheduler, dependency, api), by kind."
    );
    describe_counter!(
        "chime_scheduler_attempts_recovered_total",
        "Attempts of dead or disconnected workers recovered (retried or failed as lost)."
    );
    describe_counter!(
        "chime_scheduler_messages_republished_total",
        "Task messages published again because their queue had lost them."
    );
    describe_counter!(
        "chime_scheduler_taken_published_total",
        "Messages of tasks taken at submission published because their worker was gone or had not started them."
    );
    describe_histogram!(
        "chime_prune_seconds",
        Unit::Seconds,
        "Duration of a retention pass."
    );
    describe_counter!(
        "chime_pruned_tasks_total",
        "Ended tasks removed by retention, with their attempts and fired-trigger rows."
    );
    // Scheduler: system gauges (every instance reports the same; take the max).
    describe_gauge!(
        "chime_tasks",
        "Tasks not yet ended, by status (waiting, ready, running, retrying) and worker group."
    );
    describe_gauge!(
        "chime_workers_online",
        "Workers online or draining with a recent heartbeat, by worker group."
    );
    describe_gauge!(
        "chime_queue_depth",
        "Messages ready in a worker group's two task queues (process and inline), as the broker reports them."
    );
    describe_gauge!(
        "chime_queue_consumers",
        "Consumers on a worker group's task queues (of the one with fewer), as the broker reports them."
    );
    describe_gauge!(
        "chime_outbox_backlog",
        "Outbox rows due and not yet published."
    );
    describe_gauge!(
        "chime_outbox_oldest_seconds",
        Unit::Seconds,
        "Seconds since the oldest unpublished outbox row was due."
    );
    // Outbox relay (every service that changes state runs one).
    describe_counter!(
        "chime_outbox_published_total",
        "Outbox rows published and confirmed by the broker."
    );
    describe_counter!(
        "chime_outbox_publish_failures_total",
        "Outbox rows whose publish failed (retried)."
    );
    describe_histogram!(
        "chime_outbox_publish_seconds",
        Unit::Seconds,
        "Duration of publishing one batch of outbox rows, to the last confirm."
    );
    // The store, as each process sees it (shared/src/store/availability.rs).
    describe_gauge!(
        "chime_store_connected",
        "1 while PostgreSQL answers this process from the server (cluster_name at address:port), \
         0 once it stopped answering or another server answers."
    );
    describe_counter!(
        "chime_store_outages_total",
        "Times PostgreSQL stopped answering this process (one question a second, 5 s each)."
    );
    describe_histogram!(
        "chime_store_outage_seconds",
        Unit::Seconds,
        "How long each outage of PostgreSQL lasted, as this process saw it."
    );
    describe_counter!(
        "chime_store_server_changes_total",
        "Times PostgreSQL came back on, or answered from, another server (a failover, a \
         switchover or a restart)."
    );
    describe_counter!(
        "chime_store_listener_losses_total",
        "LISTEN sessions lost (then opened again, with a rescan for what was missed)."
    );
    describe_counter!(
        "chime_broker_connections_total",
        "Connections opened to the broker, by node (more than one means reconnections)."
    );
    describe_counter!(
        "chime_broker_connections_lost_total",
        "Connections to the broker that broke (node stopped, network cut), by node."
    );
    describe_gauge!(
        "chime_broker_connected",
        "1 while this process is connected to the node, 0 after it lost it."
    );
    // Worker.
    describe_counter!(
        "chime_worker_deliveries_total",
        "Messages delivered to this worker, by queue."
    );
    describe_counter!(
        "chime_worker_attempts_total",
        "Attempts this worker ended, by outcome (succeeded, failed, rejected, killed)."
    );
    describe_counter!(
        "chime_tasks_finished_total",
        "Tasks that ended with an attempt on this worker, by final status (outcome), worker group \
         and kind."
    );
    describe_counter!(
        "chime_task_retries_total",
        "Attempts that left their task retrying, by reason (rejected or failed), worker group and \
         kind."
    );
    describe_histogram!(
        "chime_attempt_duration_seconds",
        Unit::Seconds,
        "How long attempts ran on this worker, by worker group and kind."
    );
    describe_gauge!(
        "chime_worker_running",
        "Attempts running on this worker now."
    );
    describe_histogram!(
        "chime_worker_transition_batch",
        "Attempt starts, ends or instant completions committed in one statement, by kind (start, finish, complete)."
    );
    describe_counter!(
        "chime_worker_duplicates_total",
        "Deliveries whose attempt had already started or ended (redeliveries), dropped."
    );
    describe_counter!(
        "chime_worker_mismatched_messages_total",
        "Messages that did not match their task's row (dead-lettered)."
    );
    describe_counter!(
        "chime_worker_submissions_total",
        "Ad-hoc submissions from the submit queue recorded by this worker (re-published ids included)."
    );
    describe_counter!(
        "chime_worker_submissions_taken_total",
        "Submitted tasks this worker ran itself, in a slot it had free, with no task message."
    );
    describe_histogram!(
        "chime_worker_submission_batch_size",
        "Submissions taken from the submit queue together, recorded with one commit."
    );
    describe_counter!(
        "chime_worker_poison_total",
        "Messages that could not be decoded or were refused (dead-lettered)."
    );
    describe_counter!(
        "chime_worker_kills_total",
        "Kill requests that reached a running attempt on this worker."
    );
    describe_counter!(
        "chime_worker_heartbeats_total",
        "Heartbeats this worker wrote."
    );
    describe_counter!(
        "chime_worker_self_fenced_total",
        "Attempts this worker abandoned because its heartbeat could not be written in time."
    );
    describe_counter!(
        "chime_worker_lapsed_starts_total",
        "Messages this worker gave back unstarted because its lease ran out while it asked \
         PostgreSQL to start them."
    );
    describe_histogram!(
        "chime_worker_heartbeat_seconds",
        Unit::Seconds,
        "How long each heartbeat took to PostgreSQL and back: the lease bears round trips up \
         to (worker.lease_ms - 0.8 s) / 2 and grows with the slowest recent ones."
    );
    describe_counter!(
        "chime_worker_refusal_graces_total",
        "Refusals by PostgreSQL this worker held its attempts through under a grace mark on \
         the broker."
    );
    describe_counter!(
        "chime_worker_unheld_released_total",
        "Attempts recorded as running on this worker that it no longer held, released."
    );
    describe_counter!(
        "chime_worker_database_waits_total",
        "Deliveries that waited for the database to come back."
    );
    describe_counter!(
        "chime_worker_attempts_recovered_total",
        "Attempts of a disconnected worker recovered on redelivery."
    );
    // Dependency service.
    describe_counter!(
        "chime_dependency_advances_total",
        "Waiting tasks moved by their upstreams' ends, by outcome (ready, failed)."
    );
    describe_counter!(
        "chime_dependency_sweep_advances_total",
        "Waiting tasks moved by the periodic sweep (events missed)."
    );
    describe_counter!("chime_dependency_sweeps_total", "Sweeps of waiting tasks.");
    describe_histogram!(
        "chime_dependency_event_seconds",
        Unit::Seconds,
        "Time to handle one task event."
    );
    // API.
    describe_counter!(
        "chime_api_tasks_submitted_total",
        "Tasks submitted through the API."
    );
    describe_histogram!(
        "chime_api_submission_batch_size",
        "Single POST /api/v1/tasks requests written with one commit."
    );
    describe_counter!(
        "chime_api_tasks_killed_total",
        "Kill requests accepted by the API."
    );
    describe_counter!(
        "chime_api_live_updates_total",
        "Batches of task changes sent to the dashboard's live feed."
    );
    describe_gauge!(
        "chime_api_streams_open",
        "Event feeds and followed logs the API serves (at most 256, 32 per token)."
    );
    describe_counter!(
        "chime_api_connections_refused_total",
        "Connections closed at once because their address held its share of the API's (256, \
         and 8 of the health-check reserve)."
    );
}

/// The process whose metrics [`register_at_zero`] registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `chime scheduler`: fires, recovery, retention, the outbox relay's fire lag.
    Scheduler,
    /// `chime worker`: deliveries, attempts, the lease.
    Worker,
    /// `chime dependency`: advances and sweeps.
    Dependency,
    /// `chime api`: submissions, kills, live updates.
    Api,
}

/// Registers at zero every metric `role` records whose label values are known at start — those
/// without labels, and those labelled by a closed set (a misfire policy, an outcome) or by the
/// given worker groups and kinds — so that dashboards and alerts read 0 rather than "no data"
/// until the first event, as Prometheus advises. Labels only an event reveals (a broker node, a
/// queue) appear with their first event.
pub fn register_at_zero(role: Role, worker_groups: &[String], kinds: &[String]) {
    use metrics::{counter, gauge, histogram};
    let counters: &[&str] = match role {
        Role::Scheduler => &[
            "chime_scheduler_fires_total",
            "chime_scheduler_attempts_recovered_total",
            "chime_scheduler_retries_released_total",
            "chime_scheduler_triggers_unblocked_total",
            "chime_scheduler_messages_republished_total",
            "chime_scheduler_taken_published_total",
            "chime_pruned_tasks_total",
            "chime_outbox_published_total",
            "chime_outbox_publish_failures_total",
            "chime_jobs_success_overdue_total",
        ],
        Role::Worker => &[
            "chime_worker_heartbeats_total",
            "chime_worker_kills_total",
            "chime_worker_duplicates_total",
            "chime_worker_poison_total",
            "chime_worker_submissions_total",
            "chime_worker_submissions_taken_total",
            "chime_worker_mismatched_messages_total",
            "chime_worker_self_fenced_total",
            "chime_worker_lapsed_starts_total",
            "chime_worker_refusal_graces_total",
            "chime_worker_unheld_released_total",
            "chime_worker_attempts_recovered_total",
            "chime_worker_database_waits_total",
        ],
        Role::Dependency => &[
            "chime_dependency_sweeps_total",
            "chime_dependency_sweep_advances_total",
        ],
        Role::Api => &[
            "chime_api_tasks_submitted_total",
            "chime_api_tasks_killed_total",
            "chime_api_live_updates_total",
            "chime_api_connections_refused_total",
        ],
    };
    for name in counters {
        counter!(*name).increment(0);
    }
    let kind = match role {
        Role::Scheduler => Some("scheduler"),
        Role::Dependency => Some("dependency"),
        Role::Api => Some("api"),
        Role::Worker => None,
    };
    if let Some(kind) = kind {
        counter!("chime_service_checkins_total", "kind" => kind).increment(0);
    }
    match role {
        Role::Scheduler => {
            for outcome in ["delivered", "failed", "gave_up"] {
                counter!("chime_webhook_deliveries_total", "outcome" => outcome).increment(0);
            }
            for policy in crate::schedule::misfire::MisfirePolicy::ALL {
                counter!("chime_scheduler_misfires_total", "policy" => policy.as_str())
                    .increment(0);
            }
            for name in [
                "chime_scheduler_round_seconds",
                "chime_prune_seconds",
                "chime_outbox_publish_seconds",
            ] {
                let _ = histogram!(name);
            }
            gauge!("chime_outbox_backlog").set(0.0);
            gauge!("chime_outbox_oldest_seconds").set(0.0);
            for group in worker_groups {
                let _ = histogram!("chime_fire_lag_seconds", "worker_group" => group.clone());
            }
        }
        Role::Worker => {
            gauge!("chime_worker_running").set(0.0);
            use crate::model::AttemptOutcome;
            for outcome in [
                AttemptOutcome::Succeeded,
                AttemptOutcome::Failed,
                AttemptOutcome::Rejected,
                AttemptOutcome::Killed,
                AttemptOutcome::Lost,
            ] {
                counter!("chime_worker_attempts_total", "outcome" => outcome.as_str()).increment(0);
            }
            for group in worker_groups {
                for kind in kinds {
                    let labels = [("worker_group", group.clone()), ("kind", kind.clone())];
                    let _ = histogram!("chime_attempt_duration_seconds", &labels);
                    for outcome in ["succeeded", "failed", "killed"] {
                        let mut labels = labels.to_vec();
                        labels.push(("outcome", outcome.to_string()));
                        counter!("chime_tasks_finished_total", &labels).increment(0);
                    }
                }
            }
        }
        Role::Dependency => {
            for outcome in ["ready", "failed"] {
                counter!("chime_dependency_advances_total", "outcome" => outcome).increment(0);
            }
            let _ = histogram!("chime_dependency_event_seconds");
        }
        Role::Api => {}
    }
}

/// One metric of the catalogue, as [`described`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMetric {
    /// Its name (`chime_…`).
    pub name: String,
    /// counter, gauge or histogram.
    pub kind: &'static str,
    /// Its unit, if it has one (`seconds`, `bytes`).
    pub unit: Option<&'static str>,
    /// Its help text.
    pub help: String,
}

/// Every metric [`describe`] registers, in its order: the generated reference in the book
/// (`chime docs`) is made from this list, so it never drifts from `/metrics`.
pub fn described() -> Vec<DescribedMetric> {
    let recorder = Catalogue::default();
    metrics::with_local_recorder(&recorder, describe);
    recorder
        .0
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A recorder that keeps the descriptions it is given and records nothing.
#[derive(Default)]
struct Catalogue(std::sync::Mutex<Vec<DescribedMetric>>);

impl Catalogue {
    fn keep(
        &self,
        name: metrics::KeyName,
        kind: &'static str,
        unit: Option<Unit>,
        help: metrics::SharedString,
    ) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(DescribedMetric {
                name: name.as_str().to_owned(),
                kind,
                unit: unit.map(|u| u.as_str()),
                help: help.to_string(),
            });
    }
}

impl metrics::Recorder for Catalogue {
    fn describe_counter(
        &self,
        key: metrics::KeyName,
        unit: Option<Unit>,
        description: metrics::SharedString,
    ) {
        self.keep(key, "counter", unit, description);
    }

    fn describe_gauge(
        &self,
        key: metrics::KeyName,
        unit: Option<Unit>,
        description: metrics::SharedString,
    ) {
        self.keep(key, "gauge", unit, description);
    }

    fn describe_histogram(
        &self,
        key: metrics::KeyName,
        unit: Option<Unit>,
        description: metrics::SharedString,
    ) {
        self.keep(key, "histogram", unit, description);
    }

    fn register_counter(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::noop()
    }

    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }

    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}
