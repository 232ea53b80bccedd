//! The `shell` kind: runs an argv, or a script with `sh -c`, in its own process group.
//!
//! stdout and stderr are read into one bounded tail. On timeout or cancellation the whole process
//! group is killed, so a child the command started (`sleep` in a script) dies with it. Exit code 75
//! (EX_TEMPFAIL) means "reject, try later". With an `execute_user`, the command runs as that user
//! (see `execute_user.rs`).

use std::process::Stdio;
use std::time::Duration;

use chime_core::model::{ShellCommand, ShellSpec, TaskResult};
use chime_core::store::task_lifecycle::AttemptEnd;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

use super::Attempt;
use super::execute_user::RunAs;
use super::output::OutputTail;

/// sysexits.h's EX_TEMPFAIL: the command asks to be retried later.
const EX_TEMPFAIL: i32 = 75;
/// How long output readers may lag behind the process's exit (a background child that keeps the
/// pipe open must not hold the attempt forever).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// Runs the command (as `user`, when given) to its end or its interruption.
pub async fn run(
    spec: ShellSpec,
    user: Option<RunAs>,
    attempt: &Attempt,
    tail_bytes: usize,
) -> AttemptEnd {
    let mut command = match &spec.command {
        ShellCommand::Argv(argv) => {
            let mut command = Command::new(&argv[0]);
            command.args(&argv[1..]);
            command
        }
        ShellCommand::Script(script) => {
            let mut command = Command::new("sh");
            command.arg("-c").arg(script);
            command
        }
    };
    let message = &attempt.message;
    command
        .envs(&spec.env)
        .env("CHIME_TASK_ID", message.task_id.to_string())
        .env("CHIME_ATTEMPT", message.attempt.to_string())
        .env("CHIME_DATA", message.data.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // The command dies with its worker: a worker killed with -9 must not leave its attempt
    // running beside the re-run that recovery starts. (Set after the credentials change, which
    // would clear it; what the command itself forks is not covered.)
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
        });
    }
    if let Some(data_time) = message.data_time {
        command.env("CHIME_DATA_TIME", data_time.to_string());
    }
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    if let Some(user) = user {
        // std sets the gid before the uid and, as root, drops supplementary groups.
        command
            .uid(user.uid.as_raw())
            .gid(user.gid.as_raw())
            .env("HOME", &user.home)
            .env("USER", &user.name)
            .env("LOGNAME", &user.name);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            return AttemptEnd::Failed {
                result: TaskResult {
                    error: Some(format!("cannot start the command: {error}")),
                    ..TaskResult::default()
                },
                reason: "error",
            };
        }
    };
    let tail = OutputTail::new(tail_bytes);
    let readers = [
        child
            .stdout
            .take()
            .map(|s| tokio::spawn(read_into(s, tail.clone()))),
        child
            .stderr
            .take()
            .map(|s| tokio::spawn(read_into(s, tail.clone()))),
    ];
    let status = tokio::select! {
        status = child.wait() => Ok(status),
        why = attempt.interruption() => Err(why),
    };
    if status.is_err() {
        kill_group(&mut child).await;
    }
    for reader in readers.into_iter().flatten() {
        let abort = reader.abort_handle();
        if tokio::time::timeout(DRAIN_GRACE, reader).await.is_err() {
            abort.abort();
        }
    }
    let output = tail.text();
    match status {
        Err(why) => attempt.interrupted(
            why,
            TaskResult {
                output,
                ..TaskResult::default()
            },
        ),
        Ok(Err(error)) => AttemptEnd::Failed {
            result: TaskResult {
                output,
                error: Some(format!("waiting for the command: {error}")),
                ..TaskResult::default()
            },
            reason: "error",
        },
        Ok(Ok(status)) => {
            use std::os::unix::process::ExitStatusExt;
            let exit_code = status.code();
            let result = TaskResult {
                exit_code,
                output,
                error: None,
            };
            match (exit_code, status.signal()) {
                (Some(0), _) => AttemptEnd::Succeeded(result),
                (Some(EX_TEMPFAIL), _) => AttemptEnd::Rejected {
                    error: "the command exited 75 (EX_TEMPFAIL): try later".into(),
                    retry_after: None,
                },
                (Some(code), _) => AttemptEnd::Failed {
                    result: TaskResult {
                        error: Some(format!("exited with code {code}")),
                        ..result
                    },
                    reason: "failed",
                },
                (None, signal) => AttemptEnd::Failed {
                    result: TaskResult {
                        error: Some(format!(
                            "killed by signal {}",
                            signal.map_or("?".into(), |s| s.to_string())
                        )),
                        ..result
                    },
                    reason: "failed",
                },
            }
        }
    }
}

/// Kills the command's whole process group, then reaps the leader.
async fn kill_group(child: &mut Child) {
    if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
        // The group id is the leader's pid (process_group(0)); ESRCH means it is already gone.
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
    let _ = child.kill().await;
}

async fn read_into(mut stream: impl AsyncRead + Unpin, tail: OutputTail) {
    let mut buffer = vec![0u8; 8192];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => tail.push(&buffer[..n]),
        }
    }
}
