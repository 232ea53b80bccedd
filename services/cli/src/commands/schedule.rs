//! `chime schedule preview`: the schedule engine on the command line, no server needed.

use anyhow::Result;
use chime_core::schedule::{
    CalendarSpec, ScheduleSpec, clock_changes, format_fire_time, named_zone, preview,
};
use clap::Args;

use crate::BadInput;

/// `chime schedule preview (--cron EXPR [--tz ZONE] | --every 30s | --schedule JSON)
/// [--calendar JSON] [--count N] [--utc]`
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("when").args(["schedule", "cron", "every"]).required(true)))]
pub struct PreviewArgs {
    /// The schedule as JSON, as `trigger create --schedule` takes it, e.g.
    /// '{"kind":"cron","cron":"0 15 10 ? * 6L"}'.
    #[arg(long, visible_alias = "trigger", value_name = "JSON")]
    schedule: Option<String>,
    /// A cron expression (Quartz with seconds, or Unix with five fields), e.g. '0 */5 * * * ?'.
    #[arg(long)]
    cron: Option<String>,
    /// The cron expression's time zone (IANA, default UTC).
    #[arg(long, requires = "cron")]
    tz: Option<String>,
    /// A fixed interval from now, for ever: 30s, 5m, 1h, 1d.
    #[arg(long, value_parser = super::tasks::parse_age)]
    every: Option<u64>,
    /// An exclusion calendar as JSON.
    #[arg(long)]
    calendar: Option<String>,
    /// How many fire times.
    #[arg(long, default_value_t = 10)]
    count: usize,
    /// One RFC 3339 UTC time per line and nothing else (for scripts).
    #[arg(long)]
    utc: bool,
}

/// Prints one fire time per line in the schedule's time zone (RFC 9557: the local time, its
/// offset and the zone), with a `#` line before a fire wherever the zone's clocks change in
/// between (naming the wall times that do not occur or occur twice); `--utc` prints RFC 3339
/// UTC times only.
pub fn run(args: PreviewArgs) -> Result<()> {
    let trigger = schedule(&args)?;
    if let Some(name) = args
        .calendar
        .as_deref()
        .filter(|c| !c.trim_start().starts_with('{'))
    {
        return Err(BadInput(format!(
            "--calendar {name:?}: preview reads no store, so it takes a calendar as JSON (a \
             stored one's definition is in `chime calendar list --json`)"
        ))
        .into());
    }
    let calendar: Option<CalendarSpec> = args
        .calendar
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| BadInput(format!("--calendar: {e}")))?;
    let now = jiff::Timestamp::now();
    let fires = preview(&trigger, calendar.as_ref(), args.count, now)
        .map_err(|e| BadInput(e.to_string()))?;
    let mut out = String::with_capacity(fires.len() * 48);
    let zone_name = trigger.time_zone();
    let zone = named_zone(zone_name).filter(|_| !args.utc);
    // Clock changes from when the schedule begins (now, or its start if later) are named, so
    // a fire a change skips before the first one printed is not passed over in silence.
    let begins = trigger.start_time().map_or(now, |start| start.max(now));
    let mut after = fires.first().map_or(now, |first| begins.min(*first));
    for fire in fires {
        match &zone {
            None => out.push_str(&format_fire_time(fire)),
            Some(zone) => {
                for change in clock_changes(zone, after, fire) {
                    out.push_str("# ");
                    out.push_str(&change.describe(zone_name));
                    out.push('\n');
                }
                out.push_str(&format!("{:.3}", fire.to_zoned(zone.clone())));
                after = fire;
            }
        }
        out.push('\n');
    }
    print!("{out}");
    Ok(())
}

/// The schedule the flags give.
fn schedule(args: &PreviewArgs) -> Result<ScheduleSpec> {
    if let Some(json) = &args.schedule {
        return Ok(serde_json::from_str(json).map_err(|e| BadInput(format!("--schedule: {e}")))?);
    }
    if let Some(cron) = &args.cron {
        return Ok(ScheduleSpec::Cron {
            cron: cron.clone(),
            time_zone: args.tz.clone(),
            start_time: None,
            end_time: None,
        });
    }
    let interval_ms = args
        .every
        .and_then(|seconds| seconds.checked_mul(1000))
        .and_then(|ms| i64::try_from(ms).ok())
        .filter(|ms| *ms > 0)
        .ok_or_else(|| BadInput("--every must be at least 1s".into()))?;
    Ok(ScheduleSpec::Simple {
        interval_ms,
        repeat_count: -1,
        start_time: None,
        end_time: None,
    })
}
