//! Every setting chime reads, with its `chime.toml` key, its environment variable, its flag, its
//! default and what it does: one list, from which the book's configuration reference is
//! generated (`chime docs`), and which the tests hold to the code (every default and override
//! in `mod.rs`, and every `CHIME_` variable the sources name, is here).

/// One setting.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// Its key in `chime.toml` (`worker.concurrency` is `concurrency` under `[worker]`); empty
    /// for what only the environment sets.
    pub key: &'static str,
    /// Its environment variable.
    pub env: &'static str,
    /// Its command-line flag, if it has one.
    pub flag: &'static str,
    /// Its default, as shown to users.
    pub default: &'static str,
    /// What it does (Markdown; links are relative to the book's reference directory).
    pub meaning: &'static str,
}

/// Settings that are tables in `chime.toml` only (no environment variable): their keys.
pub const FILE_TABLES: &[(&str, &str)] = &[
    (
        "amqp_users.NAME",
        "a broker user that may submit over AMQP: `role` (`read`, `operate`, `admin`) and `execute_users` (see [Security](../operations/security.md))",
    ),
    (
        "executors.KIND",
        "a command template: a job kind a worker runs as a command (`command = [\"hive\", \"-e\", \"{content}\"]`, `env`, `cwd`)",
    ),
];

/// Every setting, in the order the reference lists them.
pub const SETTINGS: &[Setting] = &[
    Setting {
        key: r#""#,
        env: r#"CHIME_CONFIG"#,
        flag: r#"--config PATH"#,
        default: r#"`chime.toml`"#,
        meaning: r#"the settings file (TOML; in the working directory by default; a missing file is no error)"#,
    },
    Setting {
        key: r#"database_url"#,
        env: r#"CHIME_DATABASE_URL"#,
        flag: r#"--database-url"#,
        default: r#"`postgres://postgres@127.0.0.1:5432/chime`"#,
        meaning: r#"PostgreSQL (`postgres://`; a service refuses any other scheme at start-up); the database is created if absent and migrated at start-up; `DATABASE_URL` is read too, below `CHIME_DATABASE_URL`"#,
    },
    Setting {
        key: r#"amqp_url"#,
        env: r#"CHIME_AMQP_URL"#,
        flag: r#"--amqp-url"#,
        default: r#"`amqp://guest:guest@127.0.0.1:5672/%2f`"#,
        meaning: r#"RabbitMQ; the nodes of a cluster may be listed, comma-separated: each process starts at a random one (so connections spread), and moves to the next that answers when its node goes. A broker that is down is waited for; a URL that is not `amqp://`/`amqps://`, or credentials or a virtual host the broker refuses, end start-up with an error"#,
    },
    Setting {
        key: r#"prefix"#,
        env: r#"CHIME_PREFIX"#,
        flag: r#"--prefix"#,
        default: r#"`chime`"#,
        meaning: r#"prefix of every exchange and queue name"#,
    },
    Setting {
        key: r#"api_addr"#,
        env: r#"CHIME_API_ADDR"#,
        flag: r#"--api-addr"#,
        default: r#"`127.0.0.1:8080`"#,
        meaning: r#"where `chime up` / `chime api` listen"#,
    },
    Setting {
        key: r#"api_url"#,
        env: r#"CHIME_API_URL"#,
        flag: r#"--api-url"#,
        default: r#"`http://127.0.0.1:8080`"#,
        meaning: r#"the API the client verbs talk to"#,
    },
    Setting {
        key: r#"api_token"#,
        env: r#"CHIME_API_TOKEN"#,
        flag: r#"--token"#,
        default: r#"none"#,
        meaning: r#"the bootstrap admin token of the API, and the token the client sends (see [Security](../operations/security.md))"#,
    },
    Setting {
        key: r#"insecure_no_auth"#,
        env: r#"CHIME_INSECURE_NO_AUTH"#,
        flag: r#"--insecure-no-auth"#,
        default: r#"false"#,
        meaning: r#"let the API listen beyond loopback with no token (only behind a proxy that authenticates)"#,
    },
    Setting {
        key: r#"metrics_public"#,
        env: r#"CHIME_METRICS_PUBLIC"#,
        flag: r#""#,
        default: r#"false"#,
        meaning: r#"serve `/metrics` without a token when tokens are in use"#,
    },
    Setting {
        key: r#"metrics_addr"#,
        env: r#"CHIME_METRICS_ADDR"#,
        flag: r#"--metrics-addr"#,
        default: r#"none"#,
        meaning: r#"where `chime scheduler`, `chime worker` and `chime dependency` serve their own Prometheus `/metrics` (the API serves its own on its address); bind it where only the scraper reaches"#,
    },
    Setting {
        key: r#"db_pool_size"#,
        env: r#"CHIME_DB_POOL_SIZE"#,
        flag: r#""#,
        default: r#"by role"#,
        meaning: r#"PostgreSQL connections a process pools, whatever it runs (default: worker 1 + concurrency/8, at most 3; scheduler 4; dependency 3; API 8; `chime up` 16; at least 2 but for a worker; see [Connections](../operations/connections.md))"#,
    },
    Setting {
        key: r#"worker.groups"#,
        env: r#"CHIME_WORKER__GROUPS"#,
        flag: r#"--groups a,b"#,
        default: r#"`default`"#,
        meaning: r#"worker groups a worker consumes"#,
    },
    Setting {
        key: r#"worker.concurrency"#,
        env: r#"CHIME_WORKER__CONCURRENCY"#,
        flag: r#"--concurrency N"#,
        default: r#"`16`"#,
        meaning: r#"shell and command-template tasks a worker runs at once (each one is a process)"#,
    },
    Setting {
        key: r#"worker.inline_concurrency"#,
        env: r#"CHIME_WORKER__INLINE_CONCURRENCY"#,
        flag: r#"--inline-concurrency N"#,
        default: r#"`200`"#,
        meaning: r#"noop and http tasks a worker runs at once, inside itself (no process; an http task is one request). They have their own queue per group, `<prefix>.inline.<group>`, with this prefetch, so they never wait behind shell tasks for a slot (a delivered one can wait behind one the worker took at submission: `CHIME_WORKER__TAKE_SUBMISSIONS`)"#,
    },
    Setting {
        key: r#"worker.prefetch"#,
        env: r#"CHIME_WORKER__PREFETCH"#,
        flag: r#""#,
        default: r#"concurrency"#,
        meaning: r#"unacked deliveries a worker holds per process queue (shell and command-template tasks; an inline queue's prefetch is the inline slots). A task is acked when its outcome is committed, so by default a worker holds only what it runs and a task never waits behind a busy worker while another has a free slot; more saves a broker round trip per short task, and the extra ones wait for a slot (a worker of several groups holds up to this many per group, and up to its inline slots per group of noop and http tasks)"#,
    },
    Setting {
        key: r#"worker.submit_batch"#,
        env: r#"CHIME_WORKER__SUBMIT_BATCH"#,
        flag: r#""#,
        default: r#"`500`"#,
        meaning: r#"ad-hoc submissions from `<prefix>.submit` a worker records with one commit, at most (it holds twice as many unacked); a bad or refused one is dead-lettered alone"#,
    },
    Setting {
        key: r#"worker.submit_batch_window_ms"#,
        env: r#"CHIME_WORKER__SUBMIT_BATCH_WINDOW_MS"#,
        flag: r#""#,
        default: r#"`5`"#,
        meaning: r#"how long a worker waits after a submission for more to record with it; a full batch goes at once"#,
    },
    Setting {
        key: r#"worker.take_submissions"#,
        env: r#"CHIME_WORKER__TAKE_SUBMISSIONS"#,
        flag: r#""#,
        default: r#"`true`"#,
        meaning: r#"a worker runs the noop and http submissions it records itself, for its own groups, when it has an inline slot free (no task message goes through the broker for them, as a Celery worker runs the message it took); so does a worker beside the API in one process (`chime up`) for single `POST /api/v1/tasks` requests; `false` sends every one through its group's queue to whichever worker has room"#,
    },
    Setting {
        key: r#"worker.output_tail_bytes"#,
        env: r#"CHIME_WORKER__OUTPUT_TAIL_BYTES"#,
        flag: r#""#,
        default: r#"`65536`"#,
        meaning: r#"bytes of a task's output kept"#,
    },
    Setting {
        key: r#"worker.result_max_bytes"#,
        env: r#"CHIME_WORKER__RESULT_MAX_BYTES"#,
        flag: r#""#,
        default: r#"`1048576`"#,
        meaning: r#"the largest result a shell task may write to `$CHIME_RESULT_FILE` (1 MiB); a larger one fails the attempt"#,
    },
    Setting {
        key: r#"worker.default_user"#,
        env: r#"CHIME_WORKER__DEFAULT_USER"#,
        flag: r#""#,
        default: r#"`nobody`"#,
        meaning: r#"the user a root worker runs a task without `execute_user` as"#,
    },
    Setting {
        key: r#"worker.execute_users"#,
        env: r#"CHIME_WORKER__EXECUTE_USERS"#,
        flag: r#""#,
        default: r#"none"#,
        meaning: r#"users a task may ask for as `execute_user` on this worker (`a,b`; `*` = any but root; root only if listed)"#,
    },
    Setting {
        key: r#"worker.allow_open_store"#,
        env: r#"CHIME_WORKER__ALLOW_OPEN_STORE"#,
        flag: r#""#,
        default: r#"false"#,
        meaning: r#"run tasks as other users even though they could reach PostgreSQL or RabbitMQ without credentials (a root worker that finds `trust` or `guest` open refuses to start otherwise; for throwaway machines and test suites)"#,
    },
    Setting {
        key: r#"worker.pass_env"#,
        env: r#"CHIME_WORKER__PASS_ENV"#,
        flag: r#""#,
        default: r#"none"#,
        meaning: r#"variables of the worker's environment passed to every task (`TZ,http_proxy`; never a `CHIME_` setting)"#,
    },
    Setting {
        key: r#"worker.http_allow"#,
        env: r#"CHIME_WORKER__HTTP_ALLOW"#,
        flag: r#""#,
        default: r#"none"#,
        meaning: r#"what http tasks may reach beyond the public internet, comma-separated: networks (`10.20.0.0/16`, `127.0.0.1`) and host names (`billing.internal`, `*.svc.cluster.local`, allowed whatever they resolve to). By default an http task may not reach loopback, link-local (the cloud metadata address among them), private, shared, benchmarking (198.18/15), reserved (240/4) or unique-local addresses; the error names the rule and this setting"#,
    },
    Setting {
        key: r#"worker.lease_ms"#,
        env: r#"CHIME_WORKER__LEASE_MS"#,
        flag: r#""#,
        default: r#"`2500`"#,
        meaning: r#"how long each heartbeat holds a worker's lease (1500–60000): a worker killed with -9 is recovered about this long after its last heartbeat. The latency budget: a heartbeat's round trip to PostgreSQL must stay under `(lease_ms - 800) / 2`, 850 ms by default. A worker whose heartbeats slow down asks for a lease three round trips (plus 0.8 s) long, up to eight times this, so PostgreSQL slow for every worker lengthens leases instead of ending attempts; a sudden jump past the budget still ends what runs at that moment, once (`chime_worker_heartbeat_seconds`; a WARN says so). Raise it for a slow link"#,
    },
    Setting {
        key: r#"worker.shutdown_grace_ms"#,
        env: r#"CHIME_WORKER__SHUTDOWN_GRACE_MS"#,
        flag: r#""#,
        default: r#"`10000`"#,
        meaning: r#"how long a draining worker (SIGTERM, `chime worker drain`) waits for running tasks; those still running after it are killed and recorded `lost`, so `requests_recovery` decides, as if the worker had died"#,
    },
    Setting {
        key: r#"scheduler.misfire_threshold_ms"#,
        env: r#"CHIME_SCHEDULER__MISFIRE_THRESHOLD_MS"#,
        flag: r#""#,
        default: r#"`60000`"#,
        meaning: r#"a fire later than this is misfired and follows its trigger's misfire policy"#,
    },
    Setting {
        key: r#"scheduler.lookahead_ms"#,
        env: r#"CHIME_SCHEDULER__LOOKAHEAD_MS"#,
        flag: r#""#,
        default: r#"`1500`"#,
        meaning: r#"triggers due this far ahead are fired early; their messages wait for their time"#,
    },
    Setting {
        key: r#"scheduler.batch"#,
        env: r#"CHIME_SCHEDULER__BATCH"#,
        flag: r#""#,
        default: r#"`1000`"#,
        meaning: r#"triggers acquired per round"#,
    },
    Setting {
        key: r#"scheduler.checkin_interval_ms"#,
        env: r#"CHIME_SCHEDULER__CHECKIN_INTERVAL_MS"#,
        flag: r#""#,
        default: r#"`2000`"#,
        meaning: r#"an instance silent for twice this long is dead"#,
    },
    Setting {
        key: r#"scheduler.republish_after_ms"#,
        env: r#"CHIME_SCHEDULER__REPUBLISH_AFTER_MS"#,
        flag: r#""#,
        default: r#"`60000`"#,
        meaning: r#"a `ready` task no worker has started for this long, whose queue in its worker group is empty (the process queue for a shell or command-template task, the inline one for noop and http), has its message published again (it was lost on the bus)"#,
    },
    Setting {
        key: r#"scheduler.retention_days"#,
        env: r#"CHIME_SCHEDULER__RETENTION_DAYS"#,
        flag: r#""#,
        default: r#"`30`"#,
        meaning: r#"ended tasks (with their attempts) and fired-trigger rows older than this are pruned hourly by one scheduler instance at a time, in 1,000-row batches; `0` keeps history for ever; a job with `--retention-days N` keeps its own tasks N days instead"#,
    },
    Setting {
        key: r#""#,
        env: r#"RUST_LOG"#,
        flag: r#""#,
        default: r#"`info`"#,
        meaning: r#"the log filter (`tracing`'s `EnvFilter` syntax: `info,chime_worker=debug`); logs go to stderr, with colour only on a terminal"#,
    },
    Setting {
        key: r#""#,
        env: r#"CHIME_LOG_FORMAT"#,
        flag: r#""#,
        default: r#"text"#,
        meaning: r#"`json` for JSON lines (one object per event, as the compose stack has it)"#,
    },
];

/// The variables chime sets for a task's command (it reads none of them).
pub const TASK_VARIABLES: &[(&str, &str)] = &[
    ("CHIME_TASK_ID", "the task's id"),
    ("CHIME_ATTEMPT", "the attempt's number, from 1"),
    (
        "CHIME_DATA_TIME",
        "the task's data time (RFC 3339), when it has one",
    ),
    ("CHIME_DATA", "the task's data (JSON)"),
    (
        "CHIME_DATA_FILE",
        "a file holding the task's data, for data too large for the environment",
    ),
    (
        "CHIME_RESULT_FILE",
        "where the command may write its result (`worker.result_max_bytes` at most)",
    ),
];

/// Variables only chime's own tools read (benchmarks, tests).
pub const TOOL_VARIABLES: &[(&str, &str)] = &[(
    "CHIME_BENCH_UP_BIN",
    "`chime bench submit` and `soak`: another build's binary to start as `chime up`",
)];

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys `mod.rs` gives a default, an override or a list parse: each is in the catalogue.
    #[test]
    fn every_key_the_loader_names_is_listed() {
        let loader = include_str!("mod.rs");
        let mut missing = Vec::new();
        for call in [
            "set_default(\"",
            "set_override_option(\"",
            "with_list_parse_key(\"",
        ] {
            for piece in loader.split(call).skip(1) {
                let key = piece.split('"').next().unwrap_or_default();
                if !SETTINGS.iter().any(|s| s.key == key) {
                    missing.push(key.to_owned());
                }
            }
        }
        assert!(
            missing.is_empty(),
            "settings missing from the catalogue: {missing:?}"
        );
    }

    /// A setting's variable is its key's, as the environment source reads it.
    #[test]
    fn every_variable_is_its_keys() {
        for setting in SETTINGS.iter().filter(|s| !s.key.is_empty()) {
            let expected = format!("CHIME_{}", setting.key.to_uppercase().replace('.', "__"));
            assert_eq!(setting.env, expected, "{setting:?}");
        }
    }

    /// Every `CHIME_…` variable named in a string of the workspace's Rust sources is listed:
    /// as a setting, a variable of a task's, or a tool's.
    #[test]
    fn every_variable_the_sources_name_is_listed() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut named = std::collections::BTreeSet::new();
        for dir in ["shared/src", "services"] {
            collect(&root.join(dir), &mut named);
        }
        let known = |name: &str| {
            SETTINGS.iter().any(|s| s.env == name)
                || TASK_VARIABLES.iter().any(|(v, _)| *v == name)
                || TOOL_VARIABLES.iter().any(|(v, _)| *v == name)
        };
        let missing: Vec<_> = named.iter().filter(|n| !known(n)).collect();
        assert!(
            missing.is_empty(),
            "variables missing from the catalogue: {missing:?}"
        );
    }

    fn collect(dir: &std::path::Path, named: &mut std::collections::BTreeSet<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                collect(&path, named);
            } else if path.extension().is_some_and(|e| e == "rs")
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                for piece in text.split("\"CHIME_").skip(1) {
                    let name: String = piece
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        named.insert(format!("CHIME_{name}"));
                    }
                }
            }
        }
    }
}
