//! Calendar-interval triggers: every n seconds … years from the start, in a zone.
//!
//! Every computation restarts from the start time. Seconds, minutes and hours are elapsed time
//! (one exact jump). Days and weeks make one big jump most of the way (80/90/95 % of it), then
//! single steps, in wall-clock days; months and years step one interval at a time, so a day
//! pinned to a short month stays pinned (yearly from 29 Feb fires on 28 Feb ever after). This is
//! Quartz's arithmetic, DST effects included (see `wall_clock`).

use std::sync::Mutex;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use super::GIVE_UP_YEAR;
use super::spec::IntervalUnit;
use super::wall_clock::{add_days, add_months, set_hour, wall};

/// A calendar-interval trigger.
#[derive(Debug)]
pub struct CalendarIntervalSchedule {
    /// Units per fire (at least 1).
    pub interval: i32,
    /// The unit.
    pub unit: IntervalUnit,
    /// The zone days, months and years are counted in.
    pub zone: TimeZone,
    /// Keep the start's hour of day across DST changes.
    pub preserve_hour_of_day: bool,
    /// With the above: skip a day whose hour does not exist.
    pub skip_day_if_hour_does_not_exist: bool,
    /// Months and years step one interval at a time from the start, each step from the previous
    /// one: the furthest element reached so far is remembered, so asking for fire after fire does
    /// not walk from the start every time.
    pub(crate) reached: Mutex<Option<Timestamp>>,
}

impl Clone for CalendarIntervalSchedule {
    fn clone(&self) -> Self {
        Self {
            interval: self.interval,
            unit: self.unit,
            zone: self.zone.clone(),
            preserve_hour_of_day: self.preserve_hour_of_day,
            skip_day_if_hour_does_not_exist: self.skip_day_if_hour_does_not_exist,
            reached: Mutex::new(None),
        }
    }
}

impl CalendarIntervalSchedule {
    /// The first fire strictly after `after` (end exclusive).
    pub fn fire_time_after(
        &self,
        start: Timestamp,
        end: Option<Timestamp>,
        after: Timestamp,
    ) -> Option<Timestamp> {
        if end.is_some_and(|end| end <= after) {
            return None;
        }
        if after < start {
            return Some(start);
        }
        let interval = i64::from(self.interval.max(1));
        let seconds_after_start = 1 + after.duration_since(start).as_millis() / 1000;
        let fire = if let Some(unit_seconds) = self.unit.seconds() {
            let step = i128::from(interval * unit_seconds);
            let jumps = (seconds_after_start + step - 1) / step;
            let offset = i64::try_from(jumps * step).ok()?;
            start.checked_add(SignedDuration::from_secs(offset)).ok()?
        } else {
            self.calendar_fire_after(start, after, interval, seconds_after_start)
        };
        if end.is_some_and(|end| end <= fire) {
            return None;
        }
        Some(fire)
    }

    fn calendar_fire_after(
        &self,
        start: Timestamp,
        after: Timestamp,
        interval: i64,
        seconds_after_start: i128,
    ) -> Timestamp {
        let zone = &self.zone;
        let initial_hour = wall(start, zone).hour();
        let step = |t: Timestamp, n: i64| match self.unit {
            IntervalUnit::Week => add_days(t, 7 * n, zone),
            IntervalUnit::Month => add_months(t, n, zone),
            IntervalUnit::Year => add_months(t, 12 * n, zone),
            _ => add_days(t, n, zone),
        };
        let mut t = start;
        if matches!(self.unit, IntervalUnit::Day | IntervalUnit::Week) {
            let days = if self.unit == IntervalUnit::Week {
                7
            } else {
                1
            };
            let mut jumps = (seconds_after_start / i128::from(interval * days * 86_400)) as i64;
            if jumps > 20 {
                let fraction = match jumps {
                    ..50 => 0.80,
                    50..500 => 0.90,
                    _ => 0.95,
                };
                jumps = (jumps as f64 * fraction) as i64;
                t = step(t, interval * jumps);
            }
        }
        let before_give_up = |t: Timestamp| wall(t, zone).year() < GIVE_UP_YEAR;
        let stepped_alone = matches!(self.unit, IntervalUnit::Month | IntervalUnit::Year);
        if stepped_alone
            && let Ok(reached) = self.reached.lock()
            && let Some(reached) = *reached
            && reached <= after
        {
            t = reached;
        }
        while t <= after && before_give_up(t) {
            let next = step(t, interval);
            if stepped_alone
                && next <= after
                && let Ok(mut reached) = self.reached.lock()
            {
                *reached = Some(next);
            }
            t = next;
        }
        while self.hour_shift_needs_advance(&mut t, initial_hour, after) && before_give_up(t) {
            t = step(t, interval);
        }
        t
    }

    /// With `preserve_hour_of_day`, puts `t` back on the start's hour; says whether it must move
    /// on by another interval (the hour does not exist and the day is skipped, or it is no
    /// longer after `after`).
    fn hour_shift_needs_advance(
        &self,
        t: &mut Timestamp,
        initial_hour: i8,
        after: Timestamp,
    ) -> bool {
        if !self.preserve_hour_of_day || wall(*t, &self.zone).hour() == initial_hour {
            return false;
        }
        *t = set_hour(*t, initial_hour, &self.zone);
        if wall(*t, &self.zone).hour() != initial_hour {
            return self.skip_day_if_hour_does_not_exist;
        }
        *t <= after
    }
}
