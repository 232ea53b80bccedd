//! The `shell` kind: runs an argv, or a script with `sh -c`, in its own process group.
//!
//! A command gets a clean environment ([`TaskEnv`]): PATH, LANG, HOME, USER and LOGNAME of the
//! user it runs as, the worker's `pass_env` variables, the task's own `env`, and CHIME_TASK_ID,
//! CHIME_ATTEMPT, CHIME_DATA_TIME and CHIME_DATA (or CHIME_DATA_FILE, a private file, when the
//! data is too large for a variable), and CHIME_RESULT_FILE, an empty file only it may write,
//! where it may leave its result as JSON. Never the worker's own settings or secrets.
//!
//! stdout and stderr share one pipe, read into one bounded tail in the order written. When the
//! command ends, or on timeout or cancellation, whatever is left of it is killed — its attempt's
//! cgroup, else its process group ([`super::sandbox`]) — so a child the command started
//! (`sleep 1000 &`, `setsid …`) dies with its attempt. Exit code 75 (EX_TEMPFAIL) means "reject, try later".

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
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
use super::sandbox::Sandbox;

/// sysexits.h's EX_TEMPFAIL: the command asks to be retried later.
const EX_TEMPFAIL: i32 = 75;
/// How long output readers may lag behind the process's exit (a background child that keeps the
/// pipe open must not hold the attempt forever).
const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// Data larger than this goes in a file (CHIME_DATA_FILE) instead of CHIME_DATA: one variable may
/// not pass the kernel's 128 KiB per-string limit, and the whole environment shares the argument
/// space with the command line.
const DATA_IN_ENV_MAX: usize = 64 * 1024;
/// PATH when the worker has none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What every task's environment starts from, read once from the worker's environment.
#[derive(Debug, Clone)]
pub struct TaskEnv {
    base: Vec<(String, String)>,
}

impl TaskEnv {
    /// PATH and LANG (the worker's, or defaults) and the `pass_env` variables the worker has.
    pub fn from_worker(pass_env: &[String]) -> Self {
        let mut base = vec![
            (
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_string()),
            ),
            (
                "LANG".to_string(),
                std::env::var("LANG").unwrap_or_else(|_| "C.UTF-8".to_string()),
            ),
        ];
        for name in pass_env {
            if let Ok(value) = std::env::var(name) {
                base.push((name.clone(), value));
            }
        }
        Self { base }
    }
}

/// The data file of one attempt, removed when the attempt ends.
struct DataFile(PathBuf);

impl Drop for DataFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes `data` to a new file only `user` can read, in the worker's data directory (removed if
/// the worker dies). `create_new` refuses a path that exists (a planted symlink included).
fn write_data_file(
    data: &str,
    attempt: &Attempt,
    user: &RunAs,
    dir: &std::path::Path,
) -> std::io::Result<DataFile> {
    // A name no other task can guess and take first.
    let path = dir.join(format!(
        "chime-data-{}-{}-{}.json",
        attempt.message.task_id,
        attempt.message.attempt,
        uuid::Uuid::now_v7().simple()
    ));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    let guard = DataFile(path);
    file.write_all(data.as_bytes())?;
    if user.switch {
        std::os::unix::fs::fchown(&file, Some(user.uid.as_raw()), Some(user.gid.as_raw()))?;
    }
    Ok(guard)
}

/// Makes the attempt's empty result file (CHIME_RESULT_FILE), writable by `user` only, in the
/// worker's data directory: the command cannot put anything else in that directory's place.
fn make_result_file(attempt: &Attempt, user: &RunAs, dir: &Path) -> std::io::Result<DataFile> {
    let path = dir.join(format!(
        "chime-result-{}-{}-{}.json",
        attempt.message.task_id,
        attempt.message.attempt,
        uuid::Uuid::now_v7().simple()
    ));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    let guard = DataFile(path);
    if user.switch {
        std::os::unix::fs::fchown(&file, Some(user.uid.as_raw()), Some(user.gid.as_raw()))?;
    }
    Ok(guard)
}

/// The result the command left: None when it wrote nothing; an error naming the limit or the
/// JSON's fault. Read through no symlink, and no further than the limit.
fn read_result(path: &Path, max: usize) -> Result<Option<serde_json::Value>, String> {
    use std::io::Read as _;
    // Not blocking on a FIFO a command running as the worker's own user could put in its place.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot read the result file ($CHIME_RESULT_FILE): {e}"))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err("the result file ($CHIME_RESULT_FILE) is no longer a plain file".into());
    }
    let mut bytes = Vec::new();
    file.take(u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the result file ($CHIME_RESULT_FILE): {e}"))?;
    if bytes.len() > max {
        return Err(format!(
            "the result file ($CHIME_RESULT_FILE) holds more than {max} bytes, the limit \
             (worker.result_max_bytes)"
        ));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| format!("the result file ($CHIME_RESULT_FILE) is not JSON: {e}"))
}

/// Runs the command as `user` to its end or its interruption; its result file holds at most
/// `result_max` bytes.
pub async fn run(
    spec: ShellSpec,
    user: RunAs,
    env: &TaskEnv,
    sandbox: &Sandbox,
    attempt: &Attempt,
    result_max: usize,
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
        .env_clear()
        .envs(env.base.iter().map(|(k, v)| (k, v)))
        .env("HOME", &user.home)
        .env("USER", &user.name)
        .env("LOGNAME", &user.name)
        .envs(&spec.env)
        .env("CHIME_TASK_ID", message.task_id.to_string())
        .env("CHIME_ATTEMPT", message.attempt.to_string())
        .stdin(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    let data = message.data.to_string();
    let _data_file = if data.len() > DATA_IN_ENV_MAX {
        match write_data_file(&data, attempt, &user, sandbox.data_dir()) {
            Ok(file) => {
                command.env("CHIME_DATA_FILE", &file.0);
                Some(file)
            }
            Err(error) => {
                return AttemptEnd::Failed {
                    result: TaskResult {
                        error: Some(format!("cannot write the task's data file: {error}")),
                        ..TaskResult::default()
                    },
                    reason: "error",
                };
            }
        }
    } else {
        command.env("CHIME_DATA", data);
        None
    };
    let result_file = match make_result_file(attempt, &user, sandbox.data_dir()) {
        Ok(file) => {
            command.env("CHIME_RESULT_FILE", &file.0);
            file
        }
        Err(error) => {
            return AttemptEnd::Failed {
                result: TaskResult {
                    error: Some(format!("cannot make the task's result file: {error}")),
                    ..TaskResult::default()
                },
                reason: "error",
            };
        }
    };
    // The command dies with its worker: a worker killed with -9 must not leave its attempt
    // running beside the re-run that recovery starts. (Set after the credentials change, which
    // would clear it; what the command itself forks is the attempt cgroup's, and the guard's.)
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
        });
    }
    let mut processes = sandbox.attempt(message.task_id, message.attempt);
    if let Some(fd) = processes.join_fd() {
        // Into the attempt's cgroup before exec, so all it starts is there too.
        // SAFETY: write(2) is async-signal-safe; the buffer is a static.
        unsafe {
            command.pre_exec(move || {
                if nix::libc::write(fd, b"0".as_ptr().cast(), 1) == 1 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    }
    if let Some(data_time) = message.data_time {
        command.env("CHIME_DATA_TIME", data_time.to_string());
    }
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    if user.switch {
        // std sets the gid before the uid and, as root, drops supplementary groups.
        command.uid(user.uid.as_raw()).gid(user.gid.as_raw());
    }
    // A worker frozen since it started the attempt may have lost it meanwhile: nothing starts
    // once the lease is gone (the guard kills only what is in the cgroup when it looks).
    if attempt.lease_lost() {
        return attempt.lease_lost_before_start();
    }
    // stdout and stderr share one pipe, so the output keeps the order in which the command
    // wrote it (two pipes read side by side interleave fast writes out of order).
    let output = match std::io::pipe().and_then(|(reader, writer)| {
        let reader =
            tokio::net::unix::pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(reader))?;
        command
            .stdout(Stdio::from(writer.try_clone()?))
            .stderr(Stdio::from(writer));
        Ok(reader)
    }) {
        Ok(reader) => reader,
        Err(error) => {
            return AttemptEnd::Failed {
                result: TaskResult {
                    error: Some(format!("cannot make the output pipe: {error}")),
                    ..TaskResult::default()
                },
                reason: "error",
            };
        }
    };
    let spawned = command.spawn();
    // The command holds the pipe's write ends: dropped, only the child's remain, and the reader
    // sees the end of the output when the child (and whatever it started) closes them.
    drop(command);
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            // Name what the user must check: the program, the user it ran as and where.
            let program = match &spec.command {
                ShellCommand::Argv(argv) => argv[0].clone(),
                ShellCommand::Script(_) => "sh".to_string(),
            };
            let dir = spec.cwd.clone().unwrap_or_else(|| {
                std::env::current_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_else(|_| "the worker's directory".into())
            });
            return AttemptEnd::Failed {
                result: TaskResult {
                    error: Some(format!(
                        "cannot start {program:?} as user {} in {dir}: {error}",
                        user.name
                    )),
                    ..TaskResult::default()
                },
                reason: "error",
            };
        }
    };
    let tail = attempt.output.clone();
    let readers = [tokio::spawn(read_into(output, tail.clone()))];
    // The group id is the leader's pid (process_group(0)); read it now, as the child forgets it
    // once reaped.
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    if let Some(group) = group {
        processes.started(group.as_raw());
    }
    let status = if attempt.lease_lost() {
        // Spawned across a freeze that outlived the lease.
        Err(None)
    } else {
        tokio::select! {
            status = child.wait() => Ok(status),
            why = attempt.interruption() => Err(Some(why)),
        }
    };
    // Ended or cut short, nothing of the attempt outlives it: what it left running in the
    // background dies too, and its pipes close.
    kill_group(group, &mut child).await;
    processes.kill().await;
    for reader in readers {
        let abort = reader.abort_handle();
        if tokio::time::timeout(DRAIN_GRACE, reader).await.is_err() {
            abort.abort();
        }
    }
    let output = tail.text();
    match status {
        Err(None) => attempt.lease_lost_end(TaskResult {
            output,
            ..TaskResult::default()
        }),
        Err(Some(why)) => attempt.interrupted(
            why,
            TaskResult {
                output,
                ..TaskResult::default()
            },
        ),
        // Killed by the guard while the worker could not act (frozen past its lease): lost,
        // not the job's failure.
        Ok(Ok(status))
            if std::os::unix::process::ExitStatusExt::signal(&status)
                == Some(Signal::SIGKILL as i32)
                && attempt.lease_lost() =>
        {
            attempt.lease_lost_end(TaskResult {
                output,
                ..TaskResult::default()
            })
        }
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
            // What a failed command left is kept when it reads; a succeeded one's must.
            let value = read_result(&result_file.0, result_max);
            let result = TaskResult {
                exit_code,
                output,
                error: None,
                value: value.clone().ok().flatten(),
            };
            match (exit_code, status.signal()) {
                (Some(0), _) => match value {
                    Ok(_) => AttemptEnd::Succeeded(result),
                    Err(why) => AttemptEnd::Failed {
                        result: TaskResult {
                            error: Some(why),
                            ..result
                        },
                        reason: "failed",
                    },
                },
                (Some(EX_TEMPFAIL), _) => AttemptEnd::Rejected {
                    result: TaskResult {
                        error: Some("the command exited 75 (EX_TEMPFAIL): try later".into()),
                        ..result
                    },
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

/// Kills the command's whole process group, then reaps the leader if it still runs.
async fn kill_group(group: Option<Pid>, child: &mut Child) {
    if let Some(group) = group {
        // ESRCH: nothing is left of the group.
        let _ = killpg(group, Signal::SIGKILL);
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
