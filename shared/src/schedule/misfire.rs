//! Misfires: a fire more than the threshold late (docs/ARCHITECTURE.md, section 4).
//!
//! | policy | Quartz | what happens |
//! |---|---|---|
//! | `smart` | SMART_POLICY | cron, calendar-interval, daily: `fire_now`; simple: `fire_now` if it fires once, `reschedule_next_with_remaining_count` if forever, else `reschedule_now_with_existing_count` |
//! | `fire_now` | FIRE_ONCE_NOW / FIRE_NOW | fire once now, then continue the schedule (a repeating simple trigger: `reschedule_now_with_remaining_count`) |
//! | `skip` | DO_NOTHING | no fire now; continue from the first fire time after now (simple: `reschedule_next_with_remaining_count`) |
//! | `fire_all` | IGNORE_MISFIRE_POLICY | fire every missed time, back to back |
//! | `reschedule_now_with_existing_count` | simple only | start again now, with the repeats not yet fired |
//! | `reschedule_now_with_remaining_count` | simple only | start again now, with the repeats left had none been missed |
//! | `reschedule_next_with_existing_count` | simple only | wait for the next slot; missed slots are not counted |
//! | `reschedule_next_with_remaining_count` | simple only | wait for the next slot; missed slots count as fired |

use std::fmt;
use std::str::FromStr;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Calendar, Schedule, ScheduleError, ScheduleKind, ScheduleSpec};

/// Quartz's default threshold for a JDBC job store.
pub const DEFAULT_THRESHOLD: SignedDuration = SignedDuration::from_secs(60);

/// What to do with a misfired trigger.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MisfirePolicy {
    /// Quartz's smart policy (see the module table).
    #[default]
    Smart,
    /// Fire once now, then continue.
    FireNow,
    /// Do nothing now; continue from the next time after now.
    Skip,
    /// Fire every missed time.
    FireAll,
    /// Simple triggers: restart now with the repeats not yet fired.
    RescheduleNowWithExistingCount,
    /// Simple triggers: restart now with the repeats left had none been missed.
    RescheduleNowWithRemainingCount,
    /// Simple triggers: the next slot; missed slots not counted.
    RescheduleNextWithExistingCount,
    /// Simple triggers: the next slot; missed slots counted as fired.
    RescheduleNextWithRemainingCount,
}

impl MisfirePolicy {
    /// Every policy.
    pub const ALL: [MisfirePolicy; 8] = [
        Self::Smart,
        Self::FireNow,
        Self::Skip,
        Self::FireAll,
        Self::RescheduleNowWithExistingCount,
        Self::RescheduleNowWithRemainingCount,
        Self::RescheduleNextWithExistingCount,
        Self::RescheduleNextWithRemainingCount,
    ];

    /// The name in the database and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Smart => "smart",
            Self::FireNow => "fire_now",
            Self::Skip => "skip",
            Self::FireAll => "fire_all",
            Self::RescheduleNowWithExistingCount => "reschedule_now_with_existing_count",
            Self::RescheduleNowWithRemainingCount => "reschedule_now_with_remaining_count",
            Self::RescheduleNextWithExistingCount => "reschedule_next_with_existing_count",
            Self::RescheduleNextWithRemainingCount => "reschedule_next_with_remaining_count",
        }
    }

    /// Whether the policy suits the schedule (the reschedule policies are for simple triggers).
    pub fn check(self, schedule: &Schedule) -> Result<(), ScheduleError> {
        let simple_only = matches!(
            self,
            Self::RescheduleNowWithExistingCount
                | Self::RescheduleNowWithRemainingCount
                | Self::RescheduleNextWithExistingCount
                | Self::RescheduleNextWithRemainingCount
        );
        if simple_only && !matches!(schedule.kind, ScheduleKind::Simple(_)) {
            return Err(ScheduleError::Invalid(format!(
                "misfire policy {self} is for simple triggers only"
            )));
        }
        Ok(())
    }
}

impl fmt::Display for MisfirePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MisfirePolicy {
    type Err = ScheduleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                ScheduleError::Invalid(format!(
                    "unknown misfire policy {s:?} (expected one of {})",
                    Self::ALL.map(|p| p.as_str()).join(", ")
                ))
            })
    }
}

/// Whether a fire scheduled at `next_fire_time` has misfired at `now`.
pub fn is_misfired(next_fire_time: Timestamp, now: Timestamp, threshold: SignedDuration) -> bool {
    now.checked_sub(threshold)
        .is_ok_and(|misfire_time| next_fire_time < misfire_time)
}

/// A trigger's state after its misfire was handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misfired {
    /// When it fires next (`now` = at once); None = complete.
    pub next_fire_time: Option<Timestamp>,
    /// Its count of fires.
    pub times_triggered: i64,
    /// Simple triggers rescheduled "now" restart here.
    pub start: Timestamp,
    /// Simple triggers rescheduled "now" have a new repeat count.
    pub repeat_count: Option<i64>,
}

impl Misfired {
    /// The schedule a simple trigger rescheduled "now" continues with (its new start and repeat
    /// count), or None when the policy left the schedule as it was.
    pub fn restarted_schedule(&self, spec: &ScheduleSpec) -> Option<ScheduleSpec> {
        match (self.repeat_count, spec) {
            (
                Some(repeat_count),
                ScheduleSpec::Simple {
                    interval_ms,
                    end_time,
                    ..
                },
            ) => Some(ScheduleSpec::Simple {
                interval_ms: *interval_ms,
                repeat_count,
                start_time: Some(self.start),
                end_time: *end_time,
            }),
            _ => None,
        }
    }
}

/// Applies `policy` to a trigger that misfired: `next_fire_time` was due more than the threshold
/// before `now`.
pub fn apply(
    schedule: &Schedule,
    policy: MisfirePolicy,
    next_fire_time: Timestamp,
    times_triggered: i64,
    calendar: Option<&Calendar>,
    now: Timestamp,
) -> Misfired {
    let unchanged = Misfired {
        next_fire_time: Some(next_fire_time),
        times_triggered,
        start: schedule.start,
        repeat_count: None,
    };
    let ScheduleKind::Simple(simple) = &schedule.kind else {
        return match policy {
            MisfirePolicy::FireAll => unchanged,
            MisfirePolicy::Skip => Misfired {
                next_fire_time: schedule.next_fire_time(now, times_triggered, calendar),
                ..unchanged
            },
            // smart, fire_now (and, refused at creation, the simple-only policies)
            _ => Misfired {
                next_fire_time: Some(now),
                ..unchanged
            },
        };
    };
    let repeat_count = simple.repeat_count;
    let policy = match policy {
        MisfirePolicy::Smart if repeat_count == 0 => MisfirePolicy::FireNow,
        MisfirePolicy::Smart if repeat_count == -1 => {
            MisfirePolicy::RescheduleNextWithRemainingCount
        }
        MisfirePolicy::Smart => MisfirePolicy::RescheduleNowWithExistingCount,
        MisfirePolicy::FireNow if repeat_count != 0 => {
            MisfirePolicy::RescheduleNowWithRemainingCount
        }
        MisfirePolicy::Skip => MisfirePolicy::RescheduleNextWithRemainingCount,
        other => other,
    };
    let restart_now = |repeat_count: i64| Misfired {
        next_fire_time: schedule.end.is_none_or(|end| end >= now).then_some(now),
        times_triggered: 0,
        start: now,
        repeat_count: Some(repeat_count),
    };
    match policy {
        MisfirePolicy::FireAll => unchanged,
        MisfirePolicy::FireNow => Misfired {
            next_fire_time: Some(now),
            ..unchanged
        },
        MisfirePolicy::RescheduleNowWithExistingCount => {
            if repeat_count == 0 || repeat_count == -1 {
                Misfired {
                    times_triggered,
                    ..restart_now(repeat_count)
                }
            } else {
                restart_now(repeat_count - times_triggered)
            }
        }
        MisfirePolicy::RescheduleNowWithRemainingCount => {
            let missed = now.duration_since(next_fire_time).as_millis()
                / i128::from(simple.interval_ms.max(1));
            if repeat_count == 0 || repeat_count == -1 {
                Misfired {
                    times_triggered,
                    ..restart_now(repeat_count)
                }
            } else {
                let left = i128::from(repeat_count) - (i128::from(times_triggered) + missed);
                restart_now(i64::try_from(left.max(0)).unwrap_or(0))
            }
        }
        MisfirePolicy::RescheduleNextWithRemainingCount
        | MisfirePolicy::RescheduleNextWithExistingCount => {
            let next = schedule.next_fire_time(now, times_triggered, calendar);
            let times_triggered = match (policy, next) {
                (MisfirePolicy::RescheduleNextWithRemainingCount, Some(next)) => {
                    let missed = next.duration_since(next_fire_time).as_millis()
                        / i128::from(simple.interval_ms.max(1));
                    times_triggered + i64::try_from(missed).unwrap_or(0)
                }
                _ => times_triggered,
            };
            Misfired {
                next_fire_time: next,
                times_triggered,
                ..unchanged
            }
        }
        MisfirePolicy::Smart | MisfirePolicy::Skip => unchanged,
    }
}
