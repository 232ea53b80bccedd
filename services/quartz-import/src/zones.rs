//! Java time-zone ids (`TimeZone.getID()`, as Quartz stores them) to what chime's `time_zone`
//! fields take: an IANA name that jiff's time-zone database knows, or a fixed offset
//! `+HH:MM` / `-HH:MM`.
//!
//! Most Java ids are IANA names. The rest are Java's own: the three-letter ids of
//! `ZoneId.SHORT_IDS` (`PST`, `IST`, `CST`…), the `SystemV/*` zones of the JDK's `systemv` file,
//! and custom `GMT±hh:mm` ids. Each maps to what Java itself resolves it to; the table was made
//! from `TimeZone.getAvailableIDs()` of OpenJDK 17 (`fixtures/JavaZones.java`), keeping the ids
//! jiff does not know, and the tests check every Java id's offsets against Java's.

use jiff::tz::{Offset, TimeZone};

/// A Java zone id chime has no equivalent for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Java time zone {id:?} has no chime equivalent: {reason}")]
pub struct UnknownZone {
    /// The Java id.
    pub id: String,
    /// Why.
    pub reason: &'static str,
}

/// The Java-only ids jiff does not know (or, for `EST`, `MST` and `HST`, knows differently:
/// Java keeps them as fixed offsets), and what Java resolves each to (`ZoneId.SHORT_IDS`, and
/// the JDK's `systemv` file for the `SystemV/*` zones without daylight saving).
const JAVA_ONLY: &[(&str, &str)] = &[
    ("ACT", "Australia/Darwin"),
    ("AET", "Australia/Sydney"),
    ("AGT", "America/Argentina/Buenos_Aires"),
    ("ART", "Africa/Cairo"),
    ("AST", "America/Anchorage"),
    ("BET", "America/Sao_Paulo"),
    ("BST", "Asia/Dhaka"),
    ("CAT", "Africa/Harare"),
    ("CNT", "America/St_Johns"),
    ("CST", "America/Chicago"),
    ("CTT", "Asia/Shanghai"),
    ("EAT", "Africa/Addis_Ababa"),
    ("ECT", "Europe/Paris"),
    ("EST", "-05:00"),
    ("HST", "-10:00"),
    ("IET", "America/Indiana/Indianapolis"),
    ("IST", "Asia/Kolkata"),
    ("JST", "Asia/Tokyo"),
    ("MIT", "Pacific/Apia"),
    ("MST", "-07:00"),
    ("NET", "Asia/Yerevan"),
    ("NST", "Pacific/Auckland"),
    ("PLT", "Asia/Karachi"),
    ("PNT", "America/Phoenix"),
    ("PRT", "America/Puerto_Rico"),
    ("PST", "America/Los_Angeles"),
    ("SST", "Pacific/Guadalcanal"),
    ("VST", "Asia/Ho_Chi_Minh"),
    ("SystemV/AST4", "-04:00"),
    ("SystemV/EST5", "-05:00"),
    ("SystemV/CST6", "-06:00"),
    ("SystemV/MST7", "-07:00"),
    ("SystemV/PST8", "-08:00"),
    ("SystemV/YST9", "-09:00"),
    ("SystemV/HST10", "-10:00"),
];

/// The largest fixed offset chime takes (java.time's too); Java's custom ids go to ±23:59.
const MAX_OFFSET_SECONDS: u32 = 18 * 3600;

/// The `SystemV/*` zones with daylight saving: the JDK keeps the U.S. rules of 1976-2006 for
/// them forever (last Sunday of April to last Sunday of October), which no IANA zone has.
const SYSTEMV_DST: &[&str] = &[
    "SystemV/AST4ADT",
    "SystemV/EST5EDT",
    "SystemV/CST6CDT",
    "SystemV/MST7MDT",
    "SystemV/PST8PDT",
    "SystemV/YST9YDT",
];

/// A Java zone id as chime's `time_zone` takes it: an IANA name, `UTC`, or `±HH:MM`.
pub fn to_chime(java_id: &str) -> Result<String, UnknownZone> {
    if java_id == "UTC" || java_id == "GMT" {
        return Ok("UTC".into());
    }
    if let Some(custom) = java_id.strip_prefix("GMT")
        && let Some(seconds) = parse_custom_offset(custom)
    {
        if seconds.unsigned_abs() > MAX_OFFSET_SECONDS {
            return Err(UnknownZone {
                id: java_id.to_string(),
                reason: "an offset beyond ±18:00, which chime (like java.time) refuses",
            });
        }
        return Ok(format_offset(seconds));
    }
    if let Some((_, chime)) = JAVA_ONLY.iter().find(|(java, _)| *java == java_id) {
        return Ok((*chime).to_string());
    }
    if SYSTEMV_DST.contains(&java_id) {
        return Err(UnknownZone {
            id: java_id.to_string(),
            reason: "Java's SystemV zones keep the U.S. daylight-saving rules of 1976-2006, \
                     which no IANA zone has",
        });
    }
    if !java_id.is_empty() && TimeZone::get(java_id).is_ok() {
        return Ok(java_id.to_string());
    }
    Err(UnknownZone {
        id: java_id.to_string(),
        reason: "neither a Java-only zone id nor one the IANA time-zone database knows",
    })
}

/// The zone itself, for computing with it (what [`to_chime`] names).
pub fn to_jiff(java_id: &str) -> Result<TimeZone, UnknownZone> {
    let name = to_chime(java_id)?;
    if let Some(seconds) = parse_fixed(&name) {
        return Offset::from_seconds(seconds)
            .map(TimeZone::fixed)
            .map_err(|_| UnknownZone {
                id: java_id.to_string(),
                reason: "offset out of range",
            });
    }
    TimeZone::get(&name).map_err(|_| UnknownZone {
        id: java_id.to_string(),
        reason: "not in the IANA time-zone database",
    })
}

/// What follows `GMT` in a custom id, as `TimeZone.parseCustomTimeZone` reads it: a sign, then
/// `h`, `hh`, `h:mm`, `hh:mm` or `hhmm` (hours at most 23, minutes at most 59).
fn parse_custom_offset(text: &str) -> Option<i32> {
    let (sign, rest) = match text.as_bytes().first()? {
        b'+' => (1, text.get(1..)?),
        b'-' => (-1, text.get(1..)?),
        _ => return None,
    };
    let digits = |s: &str| -> Option<i32> {
        if s.is_empty() || s.len() > 2 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    let (hours, minutes) = match rest.split_once(':') {
        Some((h, m)) if m.len() == 2 => (digits(h)?, digits(m)?),
        Some(_) => return None,
        None if rest.len() <= 2 => (digits(rest)?, 0),
        None if rest.len() <= 4 && rest.bytes().all(|b| b.is_ascii_digit()) => {
            let (h, m) = rest.split_at(rest.len() - 2);
            (digits(h)?, digits(m)?)
        }
        None => return None,
    };
    if hours > 23 || minutes > 59 {
        return None;
    }
    Some(sign * (hours * 3600 + minutes * 60))
}

/// `±HH:MM`, or `UTC` for zero.
fn format_offset(seconds: i32) -> String {
    if seconds == 0 {
        return "UTC".into();
    }
    let sign = if seconds < 0 { '-' } else { '+' };
    let minutes = seconds.unsigned_abs() / 60;
    format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60)
}

/// `±HH:MM` as [`format_offset`] writes it.
fn parse_fixed(text: &str) -> Option<i32> {
    let bytes = text.as_bytes();
    let sign = match bytes.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (hours, minutes) = text.get(1..)?.split_once(':')?;
    let hours: i32 = hours.parse().ok()?;
    let minutes: i32 = minutes.parse().ok()?;
    Some(sign * (hours * 3600 + minutes * 60))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chime_core::schedule::{Calendar, CalendarSpec};
    use jiff::Timestamp;

    #[test]
    fn maps_java_only_and_custom_ids() {
        let cases = [
            ("PST", "America/Los_Angeles"),
            ("IST", "Asia/Kolkata"),
            ("CST", "America/Chicago"),
            ("EST", "-05:00"),
            ("MST", "-07:00"),
            ("HST", "-10:00"),
            ("SystemV/PST8", "-08:00"),
            ("UTC", "UTC"),
            ("GMT", "UTC"),
            ("GMT+05:30", "+05:30"),
            ("GMT-8", "-08:00"),
            ("GMT-08:00", "-08:00"),
            ("GMT+0530", "+05:30"),
            ("GMT+530", "+05:30"),
            ("GMT+00:00", "UTC"),
            ("GMT-18:00", "-18:00"),
            ("GMT-00:00", "UTC"),
            ("Europe/Berlin", "Europe/Berlin"),
            ("America/New_York", "America/New_York"),
            ("Etc/GMT+5", "Etc/GMT+5"),
            ("GMT0", "GMT0"),
        ];
        for (java, chime) in cases {
            assert_eq!(to_chime(java).as_deref(), Ok(chime), "{java}");
        }
    }

    #[test]
    fn refuses_unknown_ids_naming_them() {
        for id in [
            "Mars/Olympus",
            "",
            "GMT+24:00",
            "GMT+18:01",
            "GMT-23:59",
            "GMT+5:3",
            "GMT+",
            "pst",
            "SystemV/EST5EDT",
        ] {
            let err = to_chime(id).unwrap_err();
            assert_eq!(err.id, id);
            assert!(err.to_string().contains(&format!("{id:?}")), "{err}");
        }
    }

    #[test]
    fn fixed_offsets_compute() {
        let zone = to_jiff("GMT-8").unwrap();
        let t: Timestamp = "2030-07-01T12:00:00Z".parse().unwrap();
        assert_eq!(zone.to_offset(t).seconds(), -8 * 3600);
    }

    /// Every id Java 17 knows maps, and to a zone with Java's offsets at the sample instants
    /// (`fixtures/java-zones.tsv`, written by `JavaZones.java`).
    #[test]
    fn every_java_id_matches_java_offsets() {
        let text = include_str!("../fixtures/java-zones.tsv");
        let mut lines = text.lines();
        let header = lines.next().unwrap();
        let instants: Vec<Timestamp> = header
            .rsplit_once("offset minutes at ")
            .unwrap()
            .1
            .split(' ')
            .map(|t| t.parse().unwrap())
            .collect();
        let mut checked = 0;
        let mut mismatches = Vec::new();
        for line in lines {
            let mut cols = line.split('\t');
            let id = cols.next().unwrap();
            let _zone_id = cols.next().unwrap();
            let offsets: Vec<i32> = cols
                .next()
                .unwrap()
                .split(' ')
                .map(|o| o.parse().unwrap())
                .collect();
            if SYSTEMV_DST.contains(&id) {
                assert!(to_chime(id).is_err(), "{id}");
                continue;
            }
            let zone = to_jiff(id).unwrap_or_else(|e| panic!("{e}"));
            // What to_chime names, chime takes.
            let name = to_chime(id).unwrap();
            let spec = CalendarSpec::Weekly {
                excluded_days: Vec::new(),
                time_zone: Some(name.clone()),
                base: None,
            };
            if let Err(e) = Calendar::compile(&spec) {
                panic!("{id} → {name}: {e}");
            }
            let ours: Vec<i32> = instants
                .iter()
                .map(|t| zone.to_offset(*t).seconds() / 60)
                .collect();
            if ours != offsets {
                mismatches.push(format!("{id}: java {offsets:?} jiff {ours:?}"));
            }
            checked += 1;
        }
        assert!(checked > 600, "{checked}");
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    }
}
