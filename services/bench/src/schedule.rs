//! `chime bench schedule`: next-fire computations per second on one core, over a representative
//! set of cron expressions (Quartz-only features, several zones), 10 successive fires each.

use std::hint::black_box;
use std::time::{Duration, Instant};

use chime_core::schedule::CronExpr;
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// Expressions exercising what Quartz has and Unix cron lacks: seconds, `L`, `L-n`, `W`, `LW`,
/// `nL`, `#`, wrapping ranges, steps, names, years.
pub const EXPRESSIONS: [&str; 16] = [
    "0 15 10 ? * 6L",
    "0 0 12 L-2 * ?",
    "0 0 0 15W * ?",
    "0 0 0 LW * ?",
    "0 0 12 ? JAN,JUL MON#1",
    "0 0 9-17/2 ? * MON-FRI",
    "*/7 * * * * ?",
    "30 0/20 * ? * *",
    "0 45-15 * * * ?",
    "0 0 22-2 ? * FRI-MON",
    "0 30 1 * * ?",
    "0 30 2 * * ?",
    "0 11 11 11 11 ?",
    "0 0 12 ? * SUNL",
    "0 15 10 * * ? 2027-2030",
    "0 0 0 29 2 ?",
];

/// Zones with DST, odd offsets and none.
pub const ZONES: [&str; 5] = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Asia/Kathmandu",
];

/// Fires computed per expression and zone, each from the previous one.
pub const FIRES_PER_CASE: usize = 10;

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// next-fire computations per second.
    pub per_second: f64,
    /// How many were made.
    pub computations: u64,
    /// How long it ran.
    pub elapsed: Duration,
}

/// Runs on the calling thread for about `duration`.
pub fn run(duration: Duration) -> Figures {
    let cases: Vec<(CronExpr, TimeZone)> = EXPRESSIONS
        .iter()
        .flat_map(|expression| {
            ZONES.iter().filter_map(move |zone| {
                Some((CronExpr::parse(expression).ok()?, TimeZone::get(zone).ok()?))
            })
        })
        .collect();
    let from: Timestamp = "2026-03-01T00:00:00Z"
        .parse()
        .unwrap_or(Timestamp::UNIX_EPOCH);
    let started = Instant::now();
    let mut computations = 0u64;
    while started.elapsed() < duration {
        for (cron, zone) in &cases {
            let mut at = from;
            for _ in 0..FIRES_PER_CASE {
                match cron.next_after(black_box(at), zone) {
                    Some(next) => at = next,
                    None => break,
                }
                computations += 1;
            }
        }
    }
    let elapsed = started.elapsed();
    Figures {
        per_second: computations as f64 / elapsed.as_secs_f64(),
        computations,
        elapsed,
    }
}

impl Figures {
    /// The machine-readable line.
    pub fn line(&self) -> String {
        format!(
            "bench schedule next_fire_per_s={:.0} computations={} seconds={:.2} expressions={} zones={} fires_each={}",
            self.per_second,
            self.computations,
            self.elapsed.as_secs_f64(),
            EXPRESSIONS.len(),
            ZONES.len(),
            FIRES_PER_CASE
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_benchmark_expression_parses_and_fires() {
        for expression in EXPRESSIONS {
            let cron = CronExpr::parse(expression).unwrap();
            assert!(
                cron.next_after(Timestamp::UNIX_EPOCH, &TimeZone::UTC)
                    .is_some(),
                "{expression}"
            );
        }
    }
}
