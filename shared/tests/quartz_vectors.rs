//! The schedule engine against fire times computed by Quartz 2.3.2 itself.
//!
//! `tests/data/quartz-2.3.2-schedules.jsonl` is the reference sample (DESIGN.md section 4);
//! `tests/data/quartz-oracle.jsonl` is a larger corpus generated with the same Quartz
//! (`scripts/quartz-oracle/`). Every line must match: fire times exactly, invalid expressions
//! rejected (those marked `quartz_restriction` may be accepted).

use std::path::PathBuf;

use chime_core::schedule::{Calendar, CalendarSpec, Schedule, ScheduleSpec};
use jiff::Timestamp;
use serde::Deserialize;

#[derive(Deserialize)]
struct Vector {
    id: String,
    trigger: serde_json::Value,
    calendar: Option<serde_json::Value>,
    count: usize,
    #[serde(default)]
    fires: Vec<String>,
    #[serde(default)]
    invalid: bool,
    #[serde(default)]
    quartz_restriction: bool,
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data")
        .join(name)
}

/// What the engine says for a vector: its fire times, or why it refused it.
fn evaluate(vector: &Vector) -> Result<Vec<String>, String> {
    let spec: ScheduleSpec =
        serde_json::from_value(vector.trigger.clone()).map_err(|e| e.to_string())?;
    let start = spec
        .start_time()
        .ok_or_else(|| "vector without start_time".to_string())?;
    let schedule = Schedule::compile(&spec, start).map_err(|e| e.to_string())?;
    let calendar = match &vector.calendar {
        Some(value) => {
            let spec: CalendarSpec =
                serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
            Some(Calendar::compile(&spec).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    Ok(schedule
        .fire_times(calendar.as_ref(), vector.count)
        .into_iter()
        .map(|t: Timestamp| format!("{t:.3}"))
        .collect())
}

/// Checks every line of a vector file; returns the number of lines checked.
fn check_file(name: &str) -> usize {
    let path = data(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut failures = Vec::new();
    let mut lines = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        lines += 1;
        let vector: Vector = serde_json::from_str(line).expect("a vector line");
        let outcome = evaluate(&vector);
        let ok = match (&outcome, vector.invalid) {
            (Ok(fires), false) => *fires == vector.fires,
            (Err(_), true) => true,
            (Ok(_), true) => vector.quartz_restriction,
            (Err(_), false) => false,
        };
        if !ok {
            failures.push(format!(
                "{}: trigger {} calendar {}\n  quartz: {}\n  chime:  {:?}",
                vector.id,
                vector.trigger,
                vector
                    .calendar
                    .as_ref()
                    .map_or("null".into(), |c| c.to_string()),
                if vector.invalid {
                    "invalid".to_string()
                } else {
                    format!("{:?}", vector.fires)
                },
                outcome
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {lines} vectors in {name} differ from Quartz:\n{}",
        failures.len(),
        failures.join("\n")
    );
    lines
}

#[test]
fn matches_every_quartz_vector() {
    assert_eq!(check_file("quartz-2.3.2-schedules.jsonl"), 68);
}

#[test]
fn matches_the_quartz_oracle_corpus() {
    if data("quartz-oracle.jsonl").exists() {
        assert!(check_file("quartz-oracle.jsonl") > 0);
    }
}
