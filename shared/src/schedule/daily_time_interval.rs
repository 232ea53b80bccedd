//! Daily-time-interval triggers: every n seconds, minutes or hours within a window of the day, on
//! some days of the week. Each day starts afresh at the window's start (the grid is
//! `day start + k × interval`); the window's end is inclusive; `repeat_count` counts actual fires
//! (repeat_count + 1 in all). Quartz's Java version has no zone (it uses the JVM's); ours does.

use jiff::civil::{Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use super::wall_clock::{add_days, time_on_date_of, wall};

/// A daily-time-interval trigger.
#[derive(Debug, Clone)]
pub struct DailyTimeIntervalSchedule {
    /// Units per fire (at least 1).
    pub interval: i32,
    /// Seconds per unit (1, 60 or 3600).
    pub unit_seconds: i64,
    /// The window's start.
    pub start_of_day: Time,
    /// The window's end (inclusive).
    pub end_of_day: Time,
    /// Bit n: weekday n (0 = Sunday) fires.
    pub days: u8,
    /// Fires after the first; -1 = forever.
    pub repeat_count: i64,
    /// The zone of the window.
    pub zone: TimeZone,
}

impl DailyTimeIntervalSchedule {
    fn on_day(&self, weekday: Weekday) -> bool {
        self.days & (1 << weekday.to_sunday_zero_offset()) != 0
    }

    /// The first fire strictly after `after`, given how many fires there have been.
    pub fn fire_time_after(
        &self,
        start: Timestamp,
        end: Option<Timestamp>,
        after: Timestamp,
        times_triggered: i64,
    ) -> Option<Timestamp> {
        if self.repeat_count != -1 && times_triggered > self.repeat_count {
            return None;
        }
        let zone = &self.zone;
        let mut at = after.checked_add(SignedDuration::from_secs(1)).ok()?;
        if at < start {
            at = start;
        }
        let past_window = at > time_on_date_of(at, self.end_of_day, zone);
        let mut fire = self.advance_to_next_day(at, past_window, end)?;
        let day_end = time_on_date_of(fire, self.end_of_day, zone);
        let day_start = time_on_date_of(fire, self.start_of_day, zone);
        if fire < day_start {
            return Some(day_start);
        }
        let elapsed = fire.duration_since(day_start).as_millis() / 1000;
        let step = i128::from(i64::from(self.interval.max(1)) * self.unit_seconds);
        let jumps = (elapsed + step - 1) / step;
        fire = day_start
            .checked_add(SignedDuration::from_secs(i64::try_from(jumps * step).ok()?))
            .ok()?;
        if fire > day_end {
            let same_day = wall(fire, zone).date() == wall(day_end, zone).date();
            fire = self.advance_to_next_day(fire, same_day, end)?;
            fire = time_on_date_of(fire, self.start_of_day, zone);
        }
        Some(fire)
    }

    /// Moves to the window start of the next allowed day when `force`d or when `at`'s day is not
    /// allowed; otherwise keeps `at`. None past the end time.
    fn advance_to_next_day(
        &self,
        at: Timestamp,
        force: bool,
        end: Option<Timestamp>,
    ) -> Option<Timestamp> {
        let zone = &self.zone;
        let mut fire = at;
        let mut day = time_on_date_of(at, self.start_of_day, zone);
        if force || !self.on_day(wall(day, zone).weekday()) {
            for _ in 0..7 {
                day = add_days(day, 1, zone);
                if self.on_day(wall(day, zone).weekday()) {
                    fire = day;
                    break;
                }
            }
        }
        if end.is_some_and(|end| fire > end) {
            return None;
        }
        Some(fire)
    }
}
