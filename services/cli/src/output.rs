//! Plain-text output: aligned tables and timestamps.

use jiff::Timestamp;

/// Prints rows as columns aligned under a header.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// A timestamp as RFC 3339 UTC with milliseconds, or `-`.
pub fn time(t: Option<Timestamp>) -> String {
    t.map_or_else(|| "-".into(), |t| format!("{t:.3}"))
}

/// An optional value, or `-`.
pub fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// `t` in zone `zone` (`2026-01-02 03:04:05 Asia/Tokyo`), or in UTC if the zone is unknown.
pub fn time_in(t: Timestamp, zone: &str) -> String {
    match chime_core::schedule::named_zone(zone) {
        Some(tz) => format!("{} {zone}", t.to_zoned(tz).strftime("%Y-%m-%d %H:%M:%S")),
        None => format!("{t:.3}"),
    }
}

/// A schedule in a few words: `cron 0 30 2 * * ?`, `every 60000 ms`, …
pub fn describe_schedule(schedule: &chime_core::schedule::ScheduleSpec) -> String {
    use chime_core::schedule::ScheduleSpec;
    let unit = |u: &chime_core::schedule::IntervalUnit| {
        serde_json::to_value(u)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    match schedule {
        ScheduleSpec::Cron { cron, .. } => format!("cron {cron}"),
        ScheduleSpec::Simple { interval_ms, .. } => format!("every {interval_ms} ms"),
        ScheduleSpec::CalendarInterval {
            interval, unit: u, ..
        } => {
            format!("every {interval} {}", unit(u))
        }
        ScheduleSpec::DailyTimeInterval {
            interval, unit: u, ..
        } => {
            format!("every {interval} {} within the day", unit(u))
        }
    }
}
