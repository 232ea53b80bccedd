//! `chime apply` of Quartz's own job XML (`quartz_data.xml`), held to Quartz 2.3.2: the same
//! file loaded by Quartz's `XMLSchedulingDataProcessor` (`tests/quartz-import/XmlOracle.java`)
//! fires each trigger at the times chime computes, and each job's data map is the job's data.
//! Needs `javac`, `java` and Debian's Quartz jars, as the import's oracle test does.

use anyhow::{Context, Result, ensure};
use chime_cli::commands::services::Services;
use chime_core::store::{jobs, triggers};
use chime_tests::{TestEnv, scratch_dir};
use jiff::{Timestamp, ToSpan};
use serde_json::{Value, json};

use crate::quartz_import::{JARS, JVM_ZONE, compile, quartz_available};

/// Quartz's XML reader parses times with JAXB's `DatatypeConverter`, which the JDK no longer
/// ships: Debian's libjaxb-api-java.
const JAXB: &str = "/usr/share/java/jaxb-api.jar";

/// A Quartz file with what users write in one: a job with its data map, a cron trigger in a
/// zone of its own, a simple trigger and a calendar-interval trigger (in the JVM's zone), each
/// with a misfire instruction, starting an hour from `now`, and the directives.
fn quartz_data(now: Timestamp) -> Result<String> {
    let start = now
        .checked_add(1.hour())?
        .round(jiff::Unit::Second)?
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    Ok(format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<job-scheduling-data xmlns="http://www.quartz-scheduler.org/xml/JobSchedulingData"
    xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
    xsi:schemaLocation="http://www.quartz-scheduler.org/xml/JobSchedulingData http://www.quartz-scheduler.org/xml/job_scheduling_data_2_0.xsd"
    version="2.0">
  <pre-processing-commands>
    <delete-jobs-in-group>legacy</delete-jobs-in-group>
  </pre-processing-commands>
  <processing-directives>
    <overwrite-existing-data>true</overwrite-existing-data>
    <ignore-duplicates>false</ignore-duplicates>
  </processing-directives>
  <schedule>
    <job>
      <name>nightly-report</name>
      <group>reports</group>
      <description>The nightly report</description>
      <job-class>qzfixture.NoopJob</job-class>
      <durability>true</durability>
      <recover>true</recover>
      <job-data-map>
        <entry><key>region</key><value>emea</value></entry>
        <entry><key>format</key><value>pdf</value></entry>
      </job-data-map>
    </job>
    <trigger>
      <cron>
        <name>weekdays</name>
        <group>reports</group>
        <job-name>nightly-report</job-name>
        <job-group>reports</job-group>
        <priority>7</priority>
        <misfire-instruction>MISFIRE_INSTRUCTION_DO_NOTHING</misfire-instruction>
        <cron-expression>0 15 2 ? * MON-FRI</cron-expression>
        <time-zone>America/New_York</time-zone>
      </cron>
    </trigger>
    <trigger>
      <simple>
        <name>every-7-minutes</name>
        <job-name>nightly-report</job-name>
        <job-group>reports</job-group>
        <start-time>{start}</start-time>
        <misfire-instruction>MISFIRE_INSTRUCTION_RESCHEDULE_NEXT_WITH_REMAINING_COUNT</misfire-instruction>
        <repeat-count>12</repeat-count>
        <repeat-interval>420000</repeat-interval>
      </simple>
    </trigger>
    <trigger>
      <calendar-interval>
        <name>fortnightly</name>
        <job-name>nightly-report</job-name>
        <job-group>reports</job-group>
        <start-time>{start}</start-time>
        <misfire-instruction>MISFIRE_INSTRUCTION_FIRE_ONCE_NOW</misfire-instruction>
        <repeat-interval>2</repeat-interval>
        <repeat-interval-unit>WEEK</repeat-interval-unit>
      </calendar-interval>
    </trigger>
  </schedule>
</job-scheduling-data>
"#
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quartz_job_file_applies_and_fires_as_quartz_fires_it() -> Result<()> {
    if !quartz_available()? {
        return Ok(());
    }
    if !std::path::Path::new(JAXB).exists() {
        let why = format!("the Quartz XML test needs {JAXB} (apt-get install libjaxb-api-java)");
        ensure!(
            std::env::var("CHIME_REQUIRE_QUARTZ").as_deref() != Ok("1"),
            "{why}; CHIME_REQUIRE_QUARTZ=1 requires it"
        );
        eprintln!("SKIPPED: {why}");
        return Ok(());
    }
    let dir = scratch_dir("quartz-xml")?;
    let classes = compile(&dir).await?;
    let file = dir.join("quartz_data.xml");
    std::fs::write(&file, quartz_data(Timestamp::now())?)?;

    let mut classpath = vec![classes.display().to_string()];
    classpath.extend(JARS.iter().map(|j| j.to_string()));
    classpath.push(JAXB.to_string());
    let oracle = tokio::process::Command::new("java")
        .arg(format!("-Duser.timezone={JVM_ZONE}"))
        .arg("-cp")
        .arg(classpath.join(":"))
        .arg("qzfixture.XmlOracle")
        .arg(&file)
        .kill_on_drop(true)
        .output()
        .await?;
    ensure!(
        oracle.status.success(),
        "XmlOracle failed: {}",
        String::from_utf8_lossy(&oracle.stderr)
    );
    let lines: Vec<Value> = String::from_utf8(oracle.stdout)?
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .context("the oracle printed a line that is not JSON")?;

    let mut env = TestEnv::new().await?;
    env.start(Services::API).await?;
    // A job the file's pre-processing-commands delete.
    env.chime_ok(&[
        "job", "create", "old", "--group", "legacy", "--kind", "noop",
    ])
    .await?;
    let path = file.display().to_string();
    let out = env
        .chime(&[
            "apply",
            "-f",
            &path,
            "--job-class",
            "qzfixture.NoopJob=shell:true",
            "--jvm-time-zone",
            JVM_ZONE,
        ])
        .await?;
    ensure!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    ensure!(
        said.contains("- job legacy.old")
            && said.contains("Plan: 4 to make, 0 to change, 1 to remove."),
        "{said}"
    );

    let mut compared = 0;
    for line in &lines {
        match line["type"].as_str() {
            Some("trigger") => {
                let (group, name) = (
                    line["group"].as_str().unwrap_or_default(),
                    line["name"].as_str().unwrap_or_default(),
                );
                let view = triggers::get(&env.store, group, name, 25).await?;
                let chime: Vec<i64> = view
                    .next_fires
                    .iter()
                    .map(|f| f.parse::<Timestamp>().map(|t| t.as_millisecond()))
                    .collect::<Result<_, _>>()?;
                let quartz: Vec<i64> = line["fires"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_i64).collect())
                    .unwrap_or_default();
                assert_eq!(
                    chime, quartz,
                    "trigger {group}.{name}: chime's fires, Quartz's"
                );
                assert_eq!(
                    i64::from(view.priority),
                    line["priority"].as_i64().unwrap_or_default(),
                    "trigger {group}.{name}'s priority"
                );
                compared += 1;
            }
            Some("job") => {
                let job = jobs::get(
                    &env.store,
                    line["group"].as_str().unwrap_or_default(),
                    line["name"].as_str().unwrap_or_default(),
                )
                .await?;
                assert_eq!(job.data, line["data"], "the job's data map");
                assert_eq!(job.data, json!({"region": "emea", "format": "pdf"}));
                assert!(job.requests_recovery);
                assert_eq!(job.source.as_deref(), Some("quartz_data.xml"));
            }
            _ => {}
        }
    }
    assert_eq!(compared, 3, "every trigger Quartz loaded: {lines:?}");

    // The same file again changes nothing.
    let out = env
        .chime(&[
            "apply",
            "-f",
            &path,
            "--job-class",
            "qzfixture.NoopJob=shell:true",
            "--jvm-time-zone",
            JVM_ZONE,
        ])
        .await?;
    ensure!(
        String::from_utf8_lossy(&out.stdout).starts_with("No changes"),
        "{out:?}"
    );
    env.cleanup().await
}

/// A Quartz file's mistakes are named at their line, with no server: an unmapped class, an
/// unknown misfire instruction, a cron Quartz would refuse.
#[test]
fn a_quartz_files_mistakes_are_named_at_their_line() -> Result<()> {
    let dir = scratch_dir("quartz-xml-bad")?;
    let file = dir.join("quartz_data.xml");
    let text = quartz_data(Timestamp::now())?;
    std::fs::write(&file, &text)?;
    let path = file.display().to_string();
    let out = crate::definitions::offline(&["validate", "-f", &path])?;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{path}:18:7: job reports.nightly-report: its class qzfixture.NoopJob has no chime command")),
        "{stderr}"
    );
    let mapped = [
        "--job-class",
        "qzfixture.NoopJob=shell:true",
        "--jvm-time-zone",
        JVM_ZONE,
    ];
    let out = crate::definitions::offline(&[&["validate", "-f", &path][..], &mapped].concat())?;
    assert!(out.status.success(), "{out:?}");

    std::fs::write(
        &file,
        text.replace(
            "MISFIRE_INSTRUCTION_DO_NOTHING",
            "MISFIRE_INSTRUCTION_SOMETIMES",
        )
        .replace("0 15 2 ? * MON-FRI", "0 15 25 ? * MON-FRI"),
    )?;
    let out = crate::definitions::offline(&[&["validate", "-f", &path][..], &mapped].concat())?;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{path}:33:9: trigger reports.weekdays: <misfire-instruction>"
        )),
        "{stderr}"
    );
    std::fs::write(
        &file,
        text.replace("0 15 2 ? * MON-FRI", "0 15 25 ? * MON-FRI"),
    )?;
    let out = crate::definitions::offline(&[&["validate", "-f", &path][..], &mapped].concat())?;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{path}:34:")),
        "the cron's line: {stderr}"
    );
    Ok(())
}
