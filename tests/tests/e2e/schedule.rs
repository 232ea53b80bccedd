//! `chime schedule preview` and `POST /api/v1/schedule/preview`: the engine from the outside.

use anyhow::Result;
use chime_cli::commands::services::Services;
use chime_tests::{TestEnv, chime_binary, http};

const LAST_FRIDAY: &str = r#"{"kind":"cron","cron":"0 15 10 ? * 6L","time_zone":"America/New_York","start_time":"2026-01-01T00:00:00Z"}"#;

async fn preview(args: &[&str]) -> Result<std::process::Output> {
    Ok(tokio::process::Command::new(chime_binary()?)
        .args(["schedule", "preview"])
        .args(args)
        .env("CHIME_CONFIG", "/nonexistent/chime.toml")
        .output()
        .await?)
}

#[tokio::test]
async fn preview_prints_one_utc_time_per_line_without_a_server() -> Result<()> {
    // --trigger, the flag's old name, is an alias of --schedule.
    let out = preview(&["--trigger", LAST_FRIDAY, "--count", "3", "--utc"]).await?;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout)?,
        "2026-01-30T15:15:00.000Z\n2026-02-27T15:15:00.000Z\n2026-03-27T14:15:00.000Z\n"
    );
    let with_calendar = preview(&[
        "--schedule",
        r#"{"kind":"simple","interval_ms":86400000,"repeat_count":-1,"start_time":"2026-01-02T09:00:00Z"}"#,
        "--calendar",
        r#"{"kind":"weekly","excluded_days":["SAT","SUN"]}"#,
        "--count",
        "2",
        "--utc",
    ])
    .await?;
    assert_eq!(
        String::from_utf8(with_calendar.stdout)?,
        "2026-01-02T09:00:00.000Z\n2026-01-05T09:00:00.000Z\n"
    );
    Ok(())
}

#[tokio::test]
async fn preview_prints_in_the_schedules_zone_and_names_the_hours_a_clock_change_skips_or_repeats()
-> Result<()> {
    // 02:30 every day in New York over the spring change: that day has no 02:30.
    let spring = preview(&[
        "--schedule",
        r#"{"kind":"cron","cron":"0 30 2 * * ?","time_zone":"America/New_York","start_time":"2027-03-13T00:00:00Z"}"#,
        "--count",
        "2",
    ])
    .await?;
    assert!(spring.status.success(), "{spring:?}");
    assert_eq!(
        String::from_utf8(spring.stdout)?,
        "2027-03-13T02:30:00.000-05:00[America/New_York]\n\
         # 2027-03-14 America/New_York: clocks go forward 1 h at 02:00 to 03:00; wall times 02:00-02:59:59 do not occur that day\n\
         2027-03-15T02:30:00.000-04:00[America/New_York]\n"
    );
    // 01:30 over the autumn change: the hour happens twice, the trigger fires once.
    let autumn = preview(&[
        "--schedule",
        r#"{"kind":"cron","cron":"0 30 1 * * ?","time_zone":"America/New_York","start_time":"2027-11-06T00:00:00Z"}"#,
        "--count",
        "2",
    ])
    .await?;
    assert_eq!(
        String::from_utf8(autumn.stdout)?,
        "2027-11-06T01:30:00.000-04:00[America/New_York]\n\
         # 2027-11-07 America/New_York: clocks go back 1 h at 02:00 to 01:00; wall times 01:00-01:59:59 occur twice that day\n\
         2027-11-07T01:30:00.000-05:00[America/New_York]\n"
    );
    // The flags `trigger create` takes.
    let cron = preview(&[
        "--cron",
        "0 0 9 * * ?",
        "--tz",
        "Asia/Tokyo",
        "--count",
        "2",
    ])
    .await?;
    let text = String::from_utf8(cron.stdout)?;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines
            .iter()
            .all(|l| l.ends_with("T09:00:00.000+09:00[Asia/Tokyo]")),
        "{text}"
    );
    let every = preview(&["--every", "90m", "--count", "3", "--utc"]).await?;
    let times: Vec<jiff::Timestamp> = String::from_utf8(every.stdout)?
        .lines()
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    assert_eq!(times.len(), 3);
    assert_eq!(
        times[2].duration_since(times[1]),
        jiff::SignedDuration::from_mins(90)
    );
    let none = preview(&["--count", "2"]).await?;
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8(none.stderr)?.contains("--cron"));
    Ok(())
}

#[tokio::test]
async fn preview_refuses_bad_input_with_exit_2_and_the_reason() -> Result<()> {
    for (args, needle) in [
        (
            vec!["--schedule", r#"{"kind":"cron","cron":"0 0 12 32 * ?"}"#],
            "error: cron field 4 (day-of-month): 32 is out of range 1-31",
        ),
        (
            vec![
                "--schedule",
                r#"{"kind":"cron","cron":"0 0 12 * * ?","time_zone":"Mars/Base"}"#,
            ],
            "error: unknown time zone \"Mars/Base\"",
        ),
        (vec!["--schedule", "not json"], "error: --schedule:"),
        (
            vec![
                "--schedule",
                LAST_FRIDAY,
                "--calendar",
                r#"{"kind":"weekly","excluded_days":["XYZ"]}"#,
            ],
            "error: \"XYZ\" is not a day of the week",
        ),
    ] {
        let out = preview(&args).await?;
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let stderr = String::from_utf8(out.stderr)?;
        assert!(
            stderr.starts_with(needle),
            "{stderr:?} should start with {needle:?}"
        );
        assert!(out.stdout.is_empty());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_previews_the_same_fire_times() -> Result<()> {
    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    let url = format!("{}/api/v1/schedule/preview", env.api_url());
    let body = serde_json::json!({
        "trigger": serde_json::from_str::<serde_json::Value>(LAST_FRIDAY)?,
        "count": 3
    });
    let response = http().post(&url).json(&body).send().await?;
    assert_eq!(response.status().as_u16(), 200);
    let answer: serde_json::Value = response.json().await?;
    assert_eq!(
        answer["fires"],
        serde_json::json!([
            "2026-01-30T15:15:00.000Z",
            "2026-02-27T15:15:00.000Z",
            "2026-03-27T14:15:00.000Z"
        ])
    );
    let bad = http()
        .post(&url)
        .json(&serde_json::json!({"trigger": {"kind": "cron", "cron": "0 60 12 * * ?"}}))
        .send()
        .await?;
    assert_eq!(bad.status().as_u16(), 400);
    let error: serde_json::Value = bad.json().await?;
    assert_eq!(
        error["error"],
        "cron field 2 (minute): 60 is out of range 0-59"
    );
    env.cleanup().await
}
