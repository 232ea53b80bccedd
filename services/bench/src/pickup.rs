//! `chime bench pickup --count N --schedulers K`: on an idle cluster, a trigger due now is
//! created N times (one at a time); time from its creation (the creating transaction's clock) to
//! its task message's publish confirm: p50, max.

use std::time::Duration;

use chime_core::config::Settings;
use chime_core::schedule::ScheduleSpec;
use chime_core::store::jobs::{self, NewJob};
use chime_core::store::triggers::{self, NewTrigger};

use crate::installation::{BenchResult, Installation};

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// Triggers created.
    pub count: i64,
    /// Scheduler instances.
    pub schedulers: usize,
    /// Median pickup, milliseconds.
    pub p50_ms: f64,
    /// Worst pickup.
    pub max_ms: f64,
}

impl Figures {
    /// The machine-readable line.
    pub fn line(&self) -> String {
        format!(
            "bench pickup count={} schedulers={} p50_ms={:.1} max_ms={:.1}",
            self.count, self.schedulers, self.p50_ms, self.max_ms
        )
    }
}

/// Runs the benchmark in its own database, dropped and recreated.
pub async fn run(settings: &Settings, count: i64, schedulers: usize) -> BenchResult<Figures> {
    let mut installation = Installation::create(settings, "pickup").await?;
    let store = installation.store.clone();
    jobs::create(
        &store,
        NewJob {
            name: "bench".into(),
            kind: "noop".into(),
            ..NewJob::default()
        },
    )
    .await?;
    installation.start_schedulers(schedulers).await?;
    for n in 0..count {
        // Idle first: every instance is asleep when the trigger arrives.
        tokio::time::sleep(Duration::from_millis(700)).await;
        triggers::create(
            &store,
            NewTrigger {
                group: None,
                name: format!("t{n}"),
                job_group: None,
                job: "bench".into(),
                schedule: ScheduleSpec::Simple {
                    interval_ms: 0,
                    repeat_count: 0,
                    start_time: None,
                    end_time: None,
                },
                calendar: None,
                misfire_policy: None,
                priority: None,
                description: None,
                data: serde_json::Value::Null,
            },
        )
        .await?;
        installation.wait_published(n + 1).await?;
    }
    let (p50, max): (f64, f64) = sqlx::query_as(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), max(ms)
         FROM (SELECT EXTRACT(EPOCH FROM o.published_at - t.created_at)::float8 * 1000 AS ms
               FROM outbox o
               JOIN tasks k ON k.id = (o.body->>'task_id')::uuid
               JOIN triggers t ON t.id = k.trigger_id) p",
    )
    .fetch_one(store.pool())
    .await?;
    installation.finish().await?;
    Ok(Figures {
        count,
        schedulers,
        p50_ms: p50,
        max_ms: max,
    })
}
