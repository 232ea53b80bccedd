//! Where an attempt's processes live, so that every one of them dies with the attempt.
//!
//! Each attempt of a command runs in a cgroup (v2) of its own, made under the worker's cgroup:
//!
//! ```text
//!   <the worker's cgroup>/chime-worker-<pid>-<start time>-<n>/<task id>-<attempt>
//! ```
//!
//! The command's first process joins it before `exec`, so everything it starts — a `setsid` or
//! double-forked child included — is in it, and one write to `cgroup.kill` ends them all when the
//! attempt ends, however it ends. Where no cgroup can be made (no cgroup v2, a read-only cgroupfs
//! in a container, a worker without the right), the attempt's process group is killed instead;
//! a process that starts a session of its own escapes that, and the book says so
//! (docs/src/operations/guarantees.md).
//!
//! A worker killed with `-9`, or frozen, cleans nothing up itself: its guard
//! ([`super::guard`]), a process of its own, kills every attempt of the worker when the worker is
//! gone or its lease runs out, before recovery can declare the worker dead and start the attempts
//! again elsewhere. A worker starting also removes what an earlier one on this machine left when
//! its guard could not run (killed with it): directories named for a process that no longer runs.
//!
//! Large task data (`CHIME_DATA_FILE`) goes in the worker's data directory, which the same guard
//! and the same start-up sweep remove.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tracing::{debug, info, warn};
use uuid::Uuid;

use super::guard::Guard;

/// The prefix of every directory a worker makes, cgroup or data.
const PREFIX: &str = "chime-worker-";
/// How long the processes of a killed cgroup get to be gone before its directory is left behind.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Distinguishes the sandboxes of the workers one process runs (tests run several).
static NEXT: AtomicU64 = AtomicU64::new(0);

/// The attempt cgroups and data directory of one worker, and the guard that cleans them up if
/// the worker dies.
#[derive(Debug)]
pub struct Sandbox {
    cgroups: Option<PathBuf>,
    data_dir: PathBuf,
    /// The worker's end of the guard's pipe: dropped (closed) when the worker stops or dies.
    guard: Guard,
}

impl Sandbox {
    /// Makes this worker's directories and starts its guard, after removing what dead workers
    /// left. Without cgroups, attempts fall back to their process groups. Fails only if the
    /// guard cannot start (no pipe or fork): a worker without one, killed with `-9` or frozen,
    /// would leave its attempts running beside their re-runs, so it must not run any.
    pub fn create() -> std::io::Result<Self> {
        let name = format!(
            "{PREFIX}{}-{}-{}",
            std::process::id(),
            start_time(std::process::id()).unwrap_or(0),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let parent = own_cgroup_dir();
        if let Some(parent) = &parent {
            sweep_cgroups(parent);
        }
        let cgroups = parent.and_then(|parent| {
            let dir = parent.join(&name);
            match std::fs::create_dir(&dir) {
                // cgroup.kill came with Linux 5.14 (the root cgroup has none, so it is looked
                // for here): without it, process groups it is.
                Ok(()) if !dir.join("cgroup.kill").exists() => {
                    info!("this kernel's cgroups have no cgroup.kill; attempts' process groups are killed instead");
                    let _ = std::fs::remove_dir(&dir);
                    None
                }
                Ok(()) => Some(dir),
                Err(error) => {
                    info!(%error, dir = %dir.display(), "cannot make a cgroup for attempts; their process groups are killed instead");
                    None
                }
            }
        });
        let temp = std::env::temp_dir();
        sweep_data_dirs(&temp);
        // The name is predictable: a random tail (UUIDv7's 74 random bits), and create_dir
        // refusing what exists, keep another user from making it first.
        let data_dir = temp.join(format!("{name}-{}", Uuid::now_v7().simple()));
        // 0711: a task's user reaches its own data file in it, and lists nothing.
        // Set again after creation: the umask may have taken bits off.
        let made = std::fs::DirBuilder::new()
            .mode(0o711)
            .create(&data_dir)
            .and_then(|()| {
                std::fs::set_permissions(&data_dir, std::fs::Permissions::from_mode(0o711))
            });
        if let Err(error) = made {
            warn!(%error, dir = %data_dir.display(), "cannot make the worker's data directory");
        }
        let guard = match Guard::start(cgroups.as_deref(), &data_dir) {
            Ok(guard) => guard,
            Err(error) => {
                if let Some(dir) = &cgroups {
                    let _ = std::fs::remove_dir(dir);
                }
                let _ = std::fs::remove_dir_all(&data_dir);
                return Err(error);
            }
        };
        Ok(Self {
            cgroups,
            data_dir,
            guard,
        })
    }

    /// Tells the guard when the worker's lease ends (boot-clock nanoseconds, its margin taken);
    /// false when it could not be told (the guard is gone, or its pipe is full).
    pub fn lease_ends(&self, deadline: i64) -> bool {
        match self.guard.deadline(deadline) {
            Ok(()) => true,
            Err(error) => {
                warn!(%error, "cannot tell the guard when the lease ends");
                false
            }
        }
    }

    /// Whether the worker's guard is still there to kill its attempts.
    pub fn guard_alive(&self) -> bool {
        self.guard.alive()
    }

    /// Where this worker writes large task data.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// A cgroup for one attempt (or, without cgroups, a record of its process group).
    pub fn attempt(&self, task_id: Uuid, attempt: i32) -> AttemptBox {
        let Some(base) = &self.cgroups else {
            return AttemptBox::without_cgroup(&self.data_dir);
        };
        let dir = base.join(format!("{task_id}-{attempt}"));
        let made = std::fs::create_dir(&dir)
            .or_else(|e| {
                // A directory left by an earlier try of the same attempt on this worker: empty it
                // (rarely more than a few milliseconds) and make it again.
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    kill_cgroup_now(&dir);
                    std::fs::create_dir(&dir)
                } else {
                    Err(e)
                }
            })
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(dir.join("cgroup.procs"))
            });
        match made {
            Ok(procs) => AttemptBox {
                cgroup: Some(dir),
                procs: Some(procs),
                data_dir: self.data_dir.clone(),
                group_file: None,
            },
            Err(error) => {
                warn!(%error, dir = %dir.display(), "cannot make the attempt's cgroup; its process group is killed instead");
                AttemptBox::without_cgroup(&self.data_dir)
            }
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // The guard wakes too (its pipe closes) and finds nothing left to do.
        if let Some(dir) = &self.cgroups {
            let _ = std::fs::remove_dir(dir);
        }
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

/// Where one attempt's processes are.
#[derive(Debug)]
pub struct AttemptBox {
    cgroup: Option<PathBuf>,
    /// `cgroup.procs`, opened by the worker: the child writes its own pid to it before `exec`,
    /// after switching users (the file's opener, root, is who the kernel checks).
    procs: Option<File>,
    data_dir: PathBuf,
    /// Without a cgroup: the file that records the process group for the guard.
    group_file: Option<PathBuf>,
}

impl AttemptBox {
    fn without_cgroup(data_dir: &Path) -> Self {
        Self {
            cgroup: None,
            procs: None,
            data_dir: data_dir.to_path_buf(),
            group_file: None,
        }
    }

    /// The descriptor the child writes `0` to, to join the cgroup; None without one.
    pub fn join_fd(&self) -> Option<RawFd> {
        self.procs.as_ref().map(|f| f.as_raw_fd())
    }

    /// Records the command's process group for the guard (without a cgroup).
    pub fn started(&mut self, group: i32) {
        if self.cgroup.is_none() {
            let path = self.data_dir.join(format!("group-{group}"));
            if File::create(&path).is_ok() {
                self.group_file = Some(path);
            }
        }
    }

    /// Kills every process of the attempt and removes its cgroup, waiting (briefly) until they
    /// are gone.
    pub async fn kill(self) {
        if let Some(dir) = &self.cgroup {
            let _ = std::fs::write(dir.join("cgroup.kill"), "1");
            let deadline = tokio::time::Instant::now() + KILL_WAIT;
            while populated(dir) && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        // Dropping it removes the emptied cgroup and the process-group record.
    }
}

impl Drop for AttemptBox {
    /// Removes the attempt's cgroup (killing what is in it, if it was not killed and waited for
    /// already: an attempt whose command never started) and its process-group record.
    fn drop(&mut self) {
        self.procs = None;
        if let Some(dir) = self.cgroup.take() {
            let _ = std::fs::write(dir.join("cgroup.kill"), "1");
            if let Err(error) = std::fs::remove_dir(&dir) {
                warn!(%error, dir = %dir.display(), "cannot remove the attempt's cgroup");
            }
        }
        if let Some(path) = self.group_file.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The directory of this process's cgroup in the cgroup v2 hierarchy, if one is mounted.
fn own_cgroup_dir() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // mountinfo: "id parent major:minor root mount-point options ... - fstype source options"
    let mount = mounts.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        (after.split_whitespace().next()? == "cgroup2").then(|| before.split_whitespace().nth(4))?
    })?;
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = cgroup.lines().find_map(|line| line.strip_prefix("0::"))?;
    let dir = Path::new(mount).join(own.trim_start_matches('/'));
    dir.join("cgroup.procs").exists().then_some(dir)
}

/// A process's start time (clock ticks after boot), which with its pid names it uniquely.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (in parentheses, which may hold spaces): field 22 is the 20th.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// Whether the worker a directory is named for (`chime-worker-<pid>-<start>-…`) is gone.
fn owner_gone(name: &str) -> bool {
    let mut parts = name.strip_prefix(PREFIX).unwrap_or("").split('-');
    let (Some(pid), Some(start)) = (
        parts.next().and_then(|p| p.parse::<u32>().ok()),
        parts.next().and_then(|s| s.parse::<u64>().ok()),
    ) else {
        return false;
    };
    start_time(pid) != Some(start)
}

/// Kills and removes the attempt cgroups of workers that are gone.
fn sweep_cgroups(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(PREFIX) || !owner_gone(&name) {
            continue;
        }
        let dir = entry.path();
        if let Ok(attempts) = std::fs::read_dir(&dir) {
            for attempt in attempts.flatten().filter(|a| a.path().is_dir()) {
                info!(cgroup = %attempt.path().display(), "killing what a dead worker's attempt left running");
                kill_cgroup_now(&attempt.path());
            }
        }
        let _ = std::fs::remove_dir(&dir);
    }
}

/// Removes the data directories of workers that are gone (only this user's own).
fn sweep_data_dirs(temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    let me = nix::unistd::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = entry.metadata().is_ok_and(|m| m.is_dir() && m.uid() == me);
        if name.starts_with(PREFIX) && ours && owner_gone(&name) {
            debug!(dir = %entry.path().display(), "removing a dead worker's data directory");
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn populated(cgroup: &Path) -> bool {
    std::fs::read_to_string(cgroup.join("cgroup.events"))
        .is_ok_and(|events| events.lines().any(|l| l == "populated 1"))
}

/// Kills a cgroup's processes and removes it, waiting up to [`KILL_WAIT`] (at start-up, before
/// any attempt runs).
fn kill_cgroup_now(dir: &Path) {
    let _ = std::fs::write(dir.join("cgroup.kill"), "1");
    let deadline = std::time::Instant::now() + KILL_WAIT;
    while populated(dir) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = std::fs::remove_dir(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_of_a_running_process_is_not_gone() {
        let me = std::process::id();
        let start = start_time(me).expect("our own start time");
        assert!(!owner_gone(&format!("{PREFIX}{me}-{start}-0")));
        assert!(owner_gone(&format!("{PREFIX}{me}-{}-0", start + 1)));
        assert!(!owner_gone("chime-worker-garbage"));
    }
}
