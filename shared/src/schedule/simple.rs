//! Simple triggers: `start + k × interval` for k = 0 … repeat_count (or forever), end exclusive.
//! The slots are always counted from the start, never from the previous fire, so a slot a
//! calendar excludes still uses up the repeat count (as in Quartz).

use jiff::{SignedDuration, Timestamp};

/// A simple trigger's slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleSchedule {
    /// Milliseconds between slots (at least 1 unless the trigger fires once).
    pub interval_ms: i64,
    /// Slots after the first; -1 = forever.
    pub repeat_count: i64,
}

impl SimpleSchedule {
    /// The first slot strictly after `after`.
    pub fn fire_time_after(
        &self,
        start: Timestamp,
        end: Option<Timestamp>,
        after: Timestamp,
        times_triggered: i64,
    ) -> Option<Timestamp> {
        let forever = self.repeat_count == -1;
        if !forever && times_triggered > self.repeat_count {
            return None;
        }
        if self.repeat_count == 0 && after >= start {
            return None;
        }
        if end.is_some_and(|end| end <= after) {
            return None;
        }
        if after < start {
            return Some(start);
        }
        let elapsed = after.duration_since(start).as_millis();
        let slot = elapsed / i128::from(self.interval_ms.max(1)) + 1;
        if !forever && slot > i128::from(self.repeat_count) {
            return None;
        }
        let offset = i64::try_from(slot * i128::from(self.interval_ms)).ok()?;
        let fire = start
            .checked_add(SignedDuration::from_millis(offset))
            .ok()?;
        if end.is_some_and(|end| end <= fire) {
            return None;
        }
        Some(fire)
    }
}
