//! `chime schedule preview`: the schedule engine on the command line, no server needed.

use anyhow::Result;
use chime_core::schedule::{CalendarSpec, ScheduleSpec, format_fire_time, preview};
use clap::Args;

use crate::BadInput;

/// `chime schedule preview --trigger JSON [--calendar JSON] [--count N]`
#[derive(Debug, Args)]
pub struct PreviewArgs {
    /// The trigger's schedule as JSON, e.g. '{"kind":"cron","cron":"0 15 10 ? * 6L"}'.
    #[arg(long)]
    trigger: String,
    /// An exclusion calendar as JSON.
    #[arg(long)]
    calendar: Option<String>,
    /// How many fire times.
    #[arg(long, default_value_t = 10)]
    count: usize,
}

/// Prints one fire time per line (RFC 3339 UTC, milliseconds).
pub fn run(args: PreviewArgs) -> Result<()> {
    let trigger: ScheduleSpec =
        serde_json::from_str(&args.trigger).map_err(|e| BadInput(format!("--trigger: {e}")))?;
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
    let fires = preview(
        &trigger,
        calendar.as_ref(),
        args.count,
        jiff::Timestamp::now(),
    )
    .map_err(|e| BadInput(e.to_string()))?;
    let mut out = String::with_capacity(fires.len() * 25);
    for fire in fires {
        out.push_str(&format_fire_time(fire));
        out.push('\n');
    }
    print!("{out}");
    Ok(())
}
