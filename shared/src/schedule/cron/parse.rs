//! Parsing cron expressions: Quartz's six or seven fields, or Unix's five.
//!
//! Every field becomes a bit set; the day fields also keep their special forms (`L`, `L-n`, `nW`,
//! `LW`, `nL`, `n#k`), which depend on the month and are resolved by the search.

use super::{CronExpr, DayRule, DomRule, DowRule, YearSet};

/// The first and last year a cron expression can name.
pub const MIN_YEAR: i16 = 1970;
/// The last year a cron expression fires in.
pub const MAX_YEAR: i16 = 2199;
/// The last year a cron expression may name; years past [`MAX_YEAR`] parse but never fire.
pub const LAST_YEAR: i16 = 9999;

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// A cron expression that does not parse, pointing at the field and the mistake.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// Wrong number of fields.
    #[error(
        "a cron expression has 6 or 7 fields (Quartz: second minute hour day-of-month month \
         day-of-week [year]) or 5 (Unix: minute hour day-of-month month day-of-week); found {0}"
    )]
    FieldCount(usize),
    /// One field is wrong.
    #[error("cron field {position} ({name}): {message}")]
    Field {
        /// 1-based position in the expression as written.
        position: usize,
        /// The field's name.
        name: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The day fields do not fit together.
    #[error("cron day fields: {0}")]
    Days(String),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
    Year,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Second => "second",
            Kind::Minute => "minute",
            Kind::Hour => "hour",
            Kind::DayOfMonth => "day-of-month",
            Kind::Month => "month",
            Kind::DayOfWeek => "day-of-week",
            Kind::Year => "year",
        }
    }
}

struct Field {
    kind: Kind,
    position: usize,
    min: u32,
    max: u32,
    /// Unix day-of-week: 0-7, 0 and 7 both Sunday.
    unix: bool,
}

impl Field {
    fn err(&self, message: impl Into<String>) -> CronError {
        CronError::Field {
            position: self.position,
            name: self.kind.name(),
            message: message.into(),
        }
    }

    fn names(&self) -> Option<&'static [&'static str]> {
        match self.kind {
            Kind::Month => Some(&MONTHS),
            Kind::DayOfWeek => Some(&DAYS),
            _ => None,
        }
    }

    /// A single value: a number or a name, checked against the range.
    fn value(&self, token: &str) -> Result<u32, CronError> {
        if token.is_empty() {
            return Err(self.err("a value is missing"));
        }
        if let Some(names) = self.names()
            && token
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
        {
            let upper = token.to_ascii_uppercase();
            return match names.iter().position(|n| *n == upper) {
                // Quartz numbers days of the week from 1 (SUN); Unix from 0.
                Some(i) if self.kind == Kind::DayOfWeek && !self.unix => Ok(i as u32 + 1),
                Some(i) if self.kind == Kind::DayOfWeek => Ok(i as u32),
                Some(i) => Ok(i as u32 + 1),
                None => Err(self.err(format!(
                    "{token:?} is not a {} name ({})",
                    self.name_kind(),
                    names.join(", ")
                ))),
            };
        }
        let n: u32 = token
            .parse()
            .map_err(|_| self.err(format!("{token:?} is not a number")))?;
        if n < self.min || n > self.max {
            return Err(self.err(format!("{n} is out of range {}-{}", self.min, self.max)));
        }
        Ok(n)
    }

    /// The field's values as a bit set (bit v for value v): `*`, lists, ranges (wrapping past the
    /// maximum, as `FRI-MON` or `22-2`), steps.
    fn set(&self, text: &str) -> Result<u128, CronError> {
        let mut set = 0u128;
        // Quartz skips empty list items ("1,,2", ",1").
        for item in text.split(',').filter(|item| !item.is_empty()) {
            set |= self.item(item)?;
        }
        Ok(set)
    }

    fn item(&self, item: &str) -> Result<u128, CronError> {
        if self.names().is_some() && item.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return self.named_item(item);
        }
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step
                    .parse()
                    .map_err(|_| self.err(format!("step {step:?} is not a number")))?;
                (range, Some(step))
            }
            None => (item, None),
        };
        let is_range = range.contains('-');
        if let Some(step) = step
            && !is_range
            && step > self.max
        {
            // Quartz checks the step of `*/n`, `/n` and `v/n` against the field's maximum.
            return Err(self.err(format!(
                "step {step} is larger than the field's maximum {}",
                self.max
            )));
        }
        let (start, end) = if range == "*" || range.is_empty() || (range == "?" && self.day_field())
        {
            (self.min, self.max)
        } else if let Some((a, b)) = range.split_once('-') {
            if !b.chars().all(|c| c.is_ascii_digit()) {
                return Err(self.err(format!(
                    "{item:?}: a range that starts with a number ends with one"
                )));
            }
            (self.value(a)?, self.value(b)?)
        } else {
            let v = self.value(range)?;
            // "5/15": from 5 to the end of the range ("5/0": just 5).
            (
                v,
                if step.is_some_and(|s| s > 0) {
                    self.max
                } else {
                    v
                },
            )
        };
        Ok(self.values(start, end, step.unwrap_or(1).max(1)))
    }

    /// A month or day name, or a range of two (`MON-FRI`). As in Quartz, only the three letters
    /// of each name count: `JAN-DEC/3` is every month.
    fn named_item(&self, item: &str) -> Result<u128, CronError> {
        let name = |text: &str| -> Result<u32, CronError> {
            let head: String = text.chars().take(3).collect();
            if head.len() < 3 || !head.chars().all(|c| c.is_ascii_alphabetic()) {
                return Err(self.err(format!("{text:?} is not a {} name", self.name_kind())));
            }
            self.value(&head)
        };
        let start = name(item)?;
        let end = match item.get(3..4) {
            Some("-") => name(item.get(4..).unwrap_or(""))?,
            _ => start,
        };
        Ok(self.values(start, end, 1))
    }

    fn name_kind(&self) -> &'static str {
        if self.kind == Kind::Month {
            "month"
        } else {
            "day"
        }
    }

    /// Values from `start` to `end` by `step`; a range whose end is before its start wraps past
    /// the maximum (`FRI-MON`, `22-2`).
    fn values(&self, start: u32, end: u32, step: u32) -> u128 {
        let span = self.max - self.min + 1;
        let end = if end < start { end + span } else { end };
        let mut set = 0u128;
        let mut v = start;
        while v <= end {
            let value = if v > self.max { v - span } else { v };
            set |= 1u128 << value;
            v += step;
        }
        set
    }

    fn day_field(&self) -> bool {
        matches!(self.kind, Kind::DayOfMonth | Kind::DayOfWeek)
    }
}

impl CronExpr {
    /// Parses a Quartz (6 or 7 fields) or Unix (5 fields) cron expression.
    pub fn parse(expression: &str) -> Result<Self, CronError> {
        let fields: Vec<&str> = expression.split_whitespace().collect();
        let unix = match fields.len() {
            5 => true,
            6 | 7 => false,
            n => return Err(CronError::FieldCount(n)),
        };
        let at = |kind: Kind| -> usize {
            let quartz = match kind {
                Kind::Second => 1,
                Kind::Minute => 2,
                Kind::Hour => 3,
                Kind::DayOfMonth => 4,
                Kind::Month => 5,
                Kind::DayOfWeek => 6,
                Kind::Year => 7,
            };
            if unix { quartz - 1 } else { quartz }
        };
        let field = |kind: Kind, min: u32, max: u32| Field {
            kind,
            position: at(kind),
            min,
            max,
            unix,
        };
        let text = |kind: Kind| at(kind).checked_sub(1).and_then(|i| fields.get(i)).copied();

        let seconds = match text(Kind::Second).filter(|_| !unix) {
            Some(t) => field(Kind::Second, 0, 59).set(t)? as u64,
            None => 1,
        };
        let minutes = field(Kind::Minute, 0, 59).set(text(Kind::Minute).unwrap_or("*"))? as u64;
        let hours = field(Kind::Hour, 0, 23).set(text(Kind::Hour).unwrap_or("*"))? as u32;
        let months = field(Kind::Month, 1, 12).set(text(Kind::Month).unwrap_or("*"))? as u16;
        let years = match text(Kind::Year).filter(|_| !unix) {
            // Quartz accepts years to 2999; they parse, and never fire past MAX_YEAR.
            Some(t) => parse_years(&field(Kind::Year, MIN_YEAR as u32, LAST_YEAR as u32), t)?,
            None => YearSet::all(),
        };
        let dom_text = text(Kind::DayOfMonth).unwrap_or("*");
        let dow_text = text(Kind::DayOfWeek).unwrap_or("*");
        let dom_field = field(Kind::DayOfMonth, 1, 31);
        let dow_field = if unix {
            field(Kind::DayOfWeek, 0, 7)
        } else {
            field(Kind::DayOfWeek, 1, 7)
        };
        let days = if unix {
            unix_days(&dom_field, dom_text, &dow_field, dow_text)?
        } else {
            quartz_days(&dom_field, dom_text, &dow_field, dow_text)?
        };
        if months == 0 || hours == 0 || minutes == 0 || seconds == 0 {
            return Err(CronError::Days("the expression matches nothing".into()));
        }
        Ok(Self {
            seconds,
            minutes,
            hours,
            months,
            days,
            years,
            dow_masks: [[0; 4]; 7],
        }
        .with_dow_masks())
    }
}

fn parse_years(field: &Field, text: &str) -> Result<YearSet, CronError> {
    let mut set = YearSet::default();
    for item in text.split(',').filter(|item| !item.is_empty()) {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step
                    .parse()
                    .map_err(|_| field.err(format!("step {step:?} is not a number")))?;
                (range, step)
            }
            None => (item, 0),
        };
        let (start, end) = if range == "*" {
            (field.min, field.max)
        } else if let Some((a, b)) = range.split_once('-') {
            (field.value(a)?, field.value(b)?)
        } else {
            let v = field.value(range)?;
            (v, if step > 0 { field.max } else { v })
        };
        if end < start {
            return Err(field.err(format!("the range {start}-{end} runs backwards")));
        }
        let mut y = start;
        while y <= end {
            set.insert(y as i16);
            y += step.max(1);
        }
    }
    Ok(set)
}

/// Quartz: exactly one of day-of-month and day-of-week is `?`.
fn quartz_days(
    dom_field: &Field,
    dom: &str,
    dow_field: &Field,
    dow: &str,
) -> Result<DayRule, CronError> {
    match (dom == "?", dow == "?") {
        (true, true) => Err(CronError::Days(
            "'?' may be given for day-of-month or day-of-week, not both".into(),
        )),
        (false, false) => Err(CronError::Days(
            "give '?' for day-of-month or for day-of-week: Quartz does not combine them (use a \
             5-field Unix expression to match either)"
                .into(),
        )),
        (true, false) => Ok(DayRule::Dow(parse_dow(dow_field, dow)?)),
        (false, true) if dom == "*" => Ok(DayRule::Any),
        (false, true) => Ok(DayRule::Dom(parse_dom(dom_field, dom)?)),
    }
}

/// Unix: a `*` day field defers to the other; when both are restricted, either may match.
fn unix_days(
    dom_field: &Field,
    dom: &str,
    dow_field: &Field,
    dow: &str,
) -> Result<DayRule, CronError> {
    let any = |t: &str| t == "*" || t == "?";
    Ok(match (any(dom), any(dow)) {
        (true, true) => DayRule::Any,
        (true, false) => DayRule::Dow(parse_dow(dow_field, dow)?),
        (false, true) => DayRule::Dom(parse_dom(dom_field, dom)?),
        (false, false) => DayRule::Either(parse_dom(dom_field, dom)?, parse_dow(dow_field, dow)?),
    })
}

fn parse_dom(field: &Field, text: &str) -> Result<DomRule, CronError> {
    if text.contains(',') && text.to_ascii_uppercase().contains('W') {
        // Quartz would silently keep only the first day of such a list.
        return Err(field.err(format!(
            "{text:?}: W takes one day; it cannot be listed with others"
        )));
    }
    let mut rule = DomRule::default();
    for item in text.split(',').filter(|item| !item.is_empty()) {
        let upper = item.to_ascii_uppercase();
        if upper == "L" {
            rule.last_offsets |= 1;
        } else if upper == "LW" {
            rule.last_weekdays |= 1;
        } else if let Some(offset) = upper.strip_prefix("L-") {
            let (offset, weekday) = match offset.strip_suffix('W') {
                Some(offset) => (offset, true),
                None => (offset, false),
            };
            let n: u32 = offset
                .parse()
                .map_err(|_| field.err(format!("{item:?}: L-n needs a number of days")))?;
            if n > 30 {
                return Err(field.err(format!(
                    "{item:?}: the offset from the last day is at most 30"
                )));
            }
            if weekday {
                rule.last_weekdays |= 1u32 << n;
            } else {
                rule.last_offsets |= 1u32 << n;
            }
        } else if let Some(day) = upper.strip_suffix('W') {
            let day = field.value(day)?;
            rule.nearest_weekdays |= 1u32 << day;
        } else if upper.contains('L') || upper.contains('W') || upper.contains('#') {
            return Err(field.err(format!(
                "{item:?}: day-of-month takes L, L-n, LW, nW, or numbers, ranges and steps"
            )));
        } else {
            rule.days |= field.set(item)? as u32;
        }
    }
    Ok(rule)
}

fn parse_dow(field: &Field, text: &str) -> Result<DowRule, CronError> {
    if text.contains(',') && text.contains('#') {
        // Quartz would silently keep only one day of such a list.
        return Err(field.err(format!(
            "{text:?}: n#k takes one day; it cannot be listed with others"
        )));
    }
    let mut rule = DowRule::default();
    // Values are Quartz's 1 (SUN) to 7 (SAT), or Unix's 0-7; store weekdays 0 (SUN) to 6.
    let weekday = |v: u32| {
        if field.unix {
            (v % 7) as u8
        } else {
            (v - 1) as u8
        }
    };
    for item in text.split(',').filter(|item| !item.is_empty()) {
        let upper = item.to_ascii_uppercase();
        // `6L` or `FRIL`: the last such weekday of the month.
        let last_of = upper
            .strip_suffix('L')
            .filter(|day| !day.is_empty() && !day.contains(['-', '/', ',']));
        if upper == "L" {
            // Alone, L is the last day of the week: Saturday.
            rule.days |= 1 << 6;
        } else if let Some((day, nth)) = upper.split_once('#') {
            let day = weekday(field.value(day)?);
            let nth: u8 = nth
                .parse()
                .map_err(|_| field.err(format!("{item:?}: the week after # is a number")))?;
            if !(1..=5).contains(&nth) {
                return Err(field.err(format!("{item:?}: the week after # is 1 to 5")));
            }
            rule.nth[usize::from(nth - 1)] |= 1 << day;
        } else if let Some(day) = last_of {
            rule.last |= 1 << weekday(field.value(day)?);
        } else {
            let set = field.set(item)?;
            for v in field.min..=field.max {
                if set & (1u128 << v) != 0 {
                    rule.days |= 1 << weekday(v);
                }
            }
        }
    }
    Ok(rule)
}
