//! The cron parser and search on arbitrary bytes: they may refuse the input, never panic or hang.
#![no_main]

use chime_core::schedule::CronExpr;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cron) = CronExpr::parse(text) {
        let zone = TimeZone::get("America/New_York").unwrap_or(TimeZone::UTC);
        let mut at = Timestamp::UNIX_EPOCH;
        for _ in 0..3 {
            match cron.next_after(at, &zone) {
                Some(next) => at = next,
                None => break,
            }
        }
    }
});
