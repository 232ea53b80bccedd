//! Tests against blobs written by Quartz 2.3.2 itself (`fixtures/MakeBlobs.java`; the facts
//! asserted here are the ones it printed to `fixtures/expected.txt`).

mod blob_triggers;
mod calendars;
mod job_data;
mod robustness;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/", $name)).as_slice()
    };
}
pub(crate) use fixture;

/// Every fixture, for the tests that feed all of them to every decoder.
pub(crate) const ALL: &[(&str, &[u8])] = &[
    ("cal_annual_chain3.ser", fixture!("cal_annual_chain3.ser")),
    ("cal_cron_kolkata.ser", fixture!("cal_cron_kolkata.ser")),
    ("cal_cron_nozone.ser", fixture!("cal_cron_nozone.ser")),
    ("cal_cycle.ser", fixture!("cal_cycle.ser")),
    (
        "cal_daily_gmt_offset.ser",
        fixture!("cal_daily_gmt_offset.ser"),
    ),
    (
        "cal_daily_inverted_ny.ser",
        fixture!("cal_daily_inverted_ny.ser"),
    ),
    ("cal_daily_millis.ser", fixture!("cal_daily_millis.ser")),
    ("cal_holiday_ny.ser", fixture!("cal_holiday_ny.ser")),
    ("cal_monthly_ist.ser", fixture!("cal_monthly_ist.ser")),
    ("cal_subclass.ser", fixture!("cal_subclass.ser")),
    ("cal_weekly_default.ser", fixture!("cal_weekly_default.ser")),
    (
        "cal_weekly_kolkata_base_holiday.ser",
        fixture!("cal_weekly_kolkata_base_holiday.ser"),
    ),
    ("jobdata_big.ser", fixture!("jobdata_big.ser")),
    ("jobdata_bomb.ser", fixture!("jobdata_bomb.ser")),
    ("jobdata_cycle.ser", fixture!("jobdata_cycle.ser")),
    ("jobdata_empty.ser", fixture!("jobdata_empty.ser")),
    ("jobdata_pojo.ser", fixture!("jobdata_pojo.ser")),
    (
        "jobdata_props.properties",
        fixture!("jobdata_props.properties"),
    ),
    (
        "jobdata_props_crlf.properties",
        fixture!("jobdata_props_crlf.properties"),
    ),
    ("jobdata_sharing.ser", fixture!("jobdata_sharing.ser")),
    ("jobdata_types.ser", fixture!("jobdata_types.ser")),
    ("raw_chunky.ser", fixture!("raw_chunky.ser")),
    ("trigger_calint.ser", fixture!("trigger_calint.ser")),
    ("trigger_cron.ser", fixture!("trigger_cron.ser")),
    ("trigger_cron_ist.ser", fixture!("trigger_cron_ist.ser")),
    (
        "trigger_cron_nullzone.ser",
        fixture!("trigger_cron_nullzone.ser"),
    ),
    ("trigger_daily.ser", fixture!("trigger_daily.ser")),
    ("trigger_simple.ser", fixture!("trigger_simple.ser")),
    ("trigger_subclass.ser", fixture!("trigger_subclass.ser")),
];

#[test]
fn every_fixture_file_is_listed() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".ser") || n.ends_with(".properties"))
        .collect();
    on_disk.sort();
    let listed: Vec<&str> = ALL.iter().map(|(n, _)| *n).collect();
    assert_eq!(on_disk, listed);
}
