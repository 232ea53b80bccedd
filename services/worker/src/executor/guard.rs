//! The guard: a process of its own, beside each worker, that kills the worker's attempts when the
//! worker dies or when the worker's lease runs out, whether or not the worker can still act.
//!
//! The worker tells the guard, through a pipe only the two of them hold, when its lease ends:
//! after each heartbeat that renewed it, an 8-byte deadline on the machine's boot clock
//! (`CLOCK_BOOTTIME`, which goes on counting through a suspend), already less
//! `workers::GUARD_MARGIN`. The guard needs nothing else from the worker:
//!
//! - past the deadline with no later one received (the worker frozen, stalled, or cut off from
//!   PostgreSQL), it kills every process of the worker's attempts — one write to the
//!   `cgroup.kill` of the cgroup that holds all attempt cgroups, else the recorded process groups
//!   — and keeps killing whatever appears there until a later deadline comes;
//! - when the pipe closes (the worker exited or was killed with -9), it kills them all and removes
//!   the worker's directories (by exec'ing a small `sh` script).
//!
//! It is forked from the worker, not exec'd, so that it works wherever the worker runs (the
//! `chime` binary, or a test binary running a worker in-process). The fork happens in a
//! multi-threaded process, so the child only makes async-signal-safe calls — raw system calls on
//! memory prepared before the fork — and never allocates, locks or unwinds. A second fork
//! detaches it, so nobody has to reap it.

use std::ffi::{CString, c_char};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::libc;

/// What the guard runs when the worker is gone: `$1` is the worker's cgroup directory (empty
/// without cgroups), `$2` its data directory. Kills and removes what is left.
const CLEANUP: &str = r#"
if [ -n "$1" ]; then
  { echo 1 > "$1/cgroup.kill"; } 2>/dev/null
  for g in "$1"/*/; do
    [ -d "$g" ] || continue
    i=0
    while grep -q '^populated 1' "${g}cgroup.events" 2>/dev/null && [ $i -lt 100 ]; do
      sleep 0.05; i=$((i + 1))
    done
    rmdir "$g" 2>/dev/null
  done
  rmdir "$1" 2>/dev/null
fi
for f in "$2"/group-*; do [ -e "$f" ] && kill -9 -- "-${f##*group-}"; done 2>/dev/null
rm -rf "$2"
"#;

/// What the guard runs past a deadline without cgroups: kills the recorded process groups.
const KILL_GROUPS: &str =
    r#"for f in "$2"/group-*; do [ -e "$f" ] && kill -9 -- "-${f##*group-}"; done 2>/dev/null"#;

/// No deadline yet: the guard waits for the pipe alone.
const NO_DEADLINE: i64 = i64::MAX;
/// While a deadline has passed, how often the guard kills again what appeared since.
const REKILL_EVERY_NS: i64 = 100_000_000;
/// Without cgroups each kill is a `sh`: not more often than this.
const REKILL_GROUPS_EVERY_NS: i64 = 1_000_000_000;

/// The worker's end of the pipe to its guard.
#[derive(Debug)]
pub struct Guard {
    pipe: std::io::PipeWriter,
}

impl Guard {
    /// Forks the guard of a worker whose attempt cgroups are under `cgroups` (None: process
    /// groups recorded in `data_dir`).
    pub fn start(cgroups: Option<&Path>, data_dir: &Path) -> std::io::Result<Self> {
        let (read, write) = std::io::pipe()?;
        // The worker must never block on its guard: a full pipe (a guard frozen for half an hour)
        // drops a deadline rather than the heartbeat.
        set_nonblocking(write.as_raw_fd())?;
        let plan = Plan::new(cgroups, data_dir, OwnedFd::from(read))?;
        // SAFETY: the children run only `Plan::run_detached`, which makes async-signal-safe
        // system calls on memory prepared before the fork.
        match unsafe { libc::fork() } {
            -1 => Err(std::io::Error::last_os_error()),
            0 => unsafe { plan.run_detached() },
            child => {
                let mut status = 0;
                // The intermediate child exits at once, leaving the guard to init.
                // SAFETY: waits on the child just forked.
                unsafe { libc::waitpid(child, &mut status, 0) };
                drop(plan);
                Ok(Self { pipe: write })
            }
        }
    }

    /// Tells the guard that the lease ends at `deadline` (boot-clock nanoseconds, margin taken).
    pub fn deadline(&self, deadline: i64) -> std::io::Result<()> {
        // 8 bytes, less than PIPE_BUF: written whole or not at all.
        (&self.pipe).write_all(&deadline.to_le_bytes())
    }

    /// Whether the guard still holds its end of the pipe. Once it is gone (killed, say), the
    /// pipe reports an error to its writer at once, and nothing would kill this worker's attempts
    /// if the worker froze or lost its lease.
    pub fn alive(&self) -> bool {
        let mut fd = libc::pollfd {
            fd: self.pipe.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: polls one descriptor this process owns, without waiting.
        let ready = unsafe { libc::poll(&mut fd, 1, 0) };
        !(ready > 0 && fd.revents & (libc::POLLERR | libc::POLLHUP) != 0)
    }
}

/// The boot clock, in nanoseconds: monotonic, and counting through a suspend.
pub fn boot_clock_ns() -> i64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into `now`; CLOCK_BOOTTIME exists on every Linux since 2.6.39.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now) };
    now.tv_sec
        .saturating_mul(1_000_000_000)
        .saturating_add(now.tv_nsec)
}

fn set_nonblocking(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor this process owns.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags == -1 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Everything the guard needs, made before the fork.
struct Plan {
    read: OwnedFd,
    /// `<cgroups>/cgroup.kill`.
    kill_file: Option<CString>,
    sh: CString,
    dev_null: CString,
    /// Backing storage of the argument vectors.
    _strings: Vec<CString>,
    cleanup_argv: Vec<*const c_char>,
    kill_groups_argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
}

impl Plan {
    fn new(cgroups: Option<&Path>, data_dir: &Path, read: OwnedFd) -> std::io::Result<Self> {
        let cstring = |bytes: &[u8]| {
            CString::new(bytes).map_err(|_| std::io::Error::other("a path with a NUL byte"))
        };
        let cgroup_dir = cgroups.map_or(&[][..], |p| p.as_os_str().as_bytes());
        let strings = vec![
            cstring(b"sh")?,
            cstring(b"-c")?,
            cstring(CLEANUP.as_bytes())?,
            cstring(b"chime-worker-guard")?,
            cstring(cgroup_dir)?,
            cstring(data_dir.as_os_str().as_bytes())?,
            cstring(KILL_GROUPS.as_bytes())?,
            cstring(b"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")?,
        ];
        let p = |i: usize| strings[i].as_ptr();
        let cleanup_argv = vec![p(0), p(1), p(2), p(3), p(4), p(5), std::ptr::null()];
        let kill_groups_argv = vec![p(0), p(1), p(6), p(3), p(4), p(5), std::ptr::null()];
        let envp = vec![p(7), std::ptr::null()];
        let kill_file = cgroups
            .map(|dir| cstring(dir.join("cgroup.kill").as_os_str().as_bytes()))
            .transpose()?;
        Ok(Self {
            read,
            kill_file,
            sh: cstring(b"/bin/sh")?,
            dev_null: cstring(b"/dev/null")?,
            _strings: strings,
            cleanup_argv,
            kill_groups_argv,
            envp,
        })
    }

    /// In the first child: forks the guard and exits.
    ///
    /// SAFETY: only in a child of `fork`; async-signal-safe calls only.
    unsafe fn run_detached(&self) -> ! {
        unsafe {
            match libc::fork() {
                0 => self.run(),
                _ => libc::_exit(0),
            }
        }
    }

    /// The guard itself.
    ///
    /// SAFETY: only in a child of `fork`; async-signal-safe calls only.
    unsafe fn run(&self) -> ! {
        unsafe {
            let fd = self.read.as_raw_fd();
            // Out of the worker's process group (a Ctrl-C meant for it does not reach the
            // guard), deaf to the signals that stop a terminal's processes.
            libc::setpgid(0, 0);
            for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
                libc::signal(signal, libc::SIG_IGN);
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            // Nothing of the worker's stays open here but the pipe: a socket of the worker held
            // by its guard would outlive the worker.
            close_all_but(fd);
            // Nor its standard streams: a pipe the worker writes its log to (a terminal's
            // pager, a supervisor, a test harness) must close when the worker exits.
            let null = libc::open(self.dev_null.as_ptr(), libc::O_RDWR);
            if null >= 0 {
                for standard in 0..3 {
                    libc::dup2(null, standard);
                }
                if null > 2 {
                    libc::close(null);
                }
            }
            // The deadline is waited for on the boot clock itself (poll's own timeout counts on
            // the monotonic clock, which stops during a suspend): an absolute timer.
            let timer = libc::timerfd_create(libc::CLOCK_BOOTTIME, libc::TFD_CLOEXEC);
            let mut deadline = NO_DEADLINE;
            let mut armed = NO_DEADLINE;
            let mut last_kill = i64::MIN;
            let mut buffer = [0u8; 512];
            loop {
                let now = boot_clock_ns();
                let wait_ms = if now >= deadline {
                    let every = if self.kill_file.is_some() {
                        REKILL_EVERY_NS
                    } else {
                        REKILL_GROUPS_EVERY_NS
                    };
                    if now.saturating_sub(last_kill) >= every {
                        self.kill_attempts();
                        last_kill = now;
                    }
                    REKILL_EVERY_NS / 1_000_000
                } else if deadline == NO_DEADLINE {
                    -1
                } else if timer >= 0 {
                    if armed != deadline {
                        arm(timer, deadline);
                        armed = deadline;
                    }
                    -1
                } else {
                    // No timer (never on a kernel chime runs on): poll's own timeout, rounded
                    // up, since waking early only loops.
                    ((deadline - now + 999_999) / 1_000_000).min(i64::from(i32::MAX))
                };
                let mut polled = [
                    libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    },
                    libc::pollfd {
                        fd: timer,
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ];
                let ready = libc::poll(polled.as_mut_ptr(), 2, wait_ms as libc::c_int);
                if polled[1].revents != 0 {
                    let mut expirations = [0u8; 8];
                    libc::read(timer, expirations.as_mut_ptr().cast(), 8);
                }
                if ready <= 0 || polled[0].revents == 0 {
                    continue;
                }
                let n = libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len());
                if n == 0 {
                    break;
                }
                if n < 0 {
                    let errno = *libc::__errno_location();
                    if errno == libc::EINTR || errno == libc::EAGAIN {
                        continue;
                    }
                    break;
                }
                // Whole 8-byte deadlines (each written at once); the latest counts. A deadline
                // never moves back: a stale one read late changes nothing.
                let mut at = 0;
                while at + 8 <= n as usize {
                    let mut bytes = [0u8; 8];
                    let mut i = 0;
                    while i < 8 {
                        bytes[i] = buffer[at + i];
                        i += 1;
                    }
                    let next = i64::from_le_bytes(bytes);
                    if deadline == NO_DEADLINE || next > deadline {
                        deadline = next;
                    }
                    at += 8;
                }
            }
            // The worker is gone: kill what is left and remove its directories.
            libc::execve(
                self.sh.as_ptr(),
                self.cleanup_argv.as_ptr(),
                self.envp.as_ptr(),
            );
            self.kill_attempts();
            libc::_exit(0)
        }
    }

    /// Kills every process of the worker's attempts.
    ///
    /// SAFETY: async-signal-safe calls only.
    unsafe fn kill_attempts(&self) {
        unsafe {
            if let Some(kill_file) = &self.kill_file {
                let file = libc::open(kill_file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if file >= 0 {
                    libc::write(file, b"1".as_ptr().cast(), 1);
                    libc::close(file);
                }
                return;
            }
            match libc::fork() {
                0 => {
                    libc::execve(
                        self.sh.as_ptr(),
                        self.kill_groups_argv.as_ptr(),
                        self.envp.as_ptr(),
                    );
                    libc::_exit(127)
                }
                -1 => {}
                child => {
                    let mut status = 0;
                    libc::waitpid(child, &mut status, 0);
                }
            }
        }
    }
}

/// Arms `timer` to expire at `deadline` on the boot clock (nanoseconds).
///
/// SAFETY: async-signal-safe calls only.
unsafe fn arm(timer: RawFd, deadline: i64) {
    let at = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: deadline / 1_000_000_000,
            tv_nsec: deadline % 1_000_000_000,
        },
    };
    unsafe { libc::timerfd_settime(timer, libc::TFD_TIMER_ABSTIME, &at, std::ptr::null_mut()) };
}

/// Closes every descriptor but the standard three and `keep`.
///
/// SAFETY: async-signal-safe calls only.
unsafe fn close_all_but(keep: RawFd) {
    unsafe {
        let keep = keep as libc::c_uint;
        let closed = |from: libc::c_uint, to: libc::c_uint| {
            from > to || libc::syscall(libc::SYS_close_range, from, to, 0) == 0
        };
        if closed(3, keep.saturating_sub(1)) && closed(keep + 1, libc::c_uint::MAX) {
            return;
        }
        // Kernels before 5.9 have no close_range.
        let mut fd = 3;
        while fd < 65_536 {
            if fd != keep as libc::c_int {
                libc::close(fd);
            }
            fd += 1;
        }
    }
}
