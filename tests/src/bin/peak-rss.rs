//! `peak-rss FILE COMMAND [ARG…]`: runs COMMAND and writes its peak resident memory, in KiB, to
//! FILE; exits as COMMAND did.
//!
//! A test cannot measure a child's peak itself: the kernel starts a child's high-water mark from
//! the memory of the process that spawned it (the spawn shares or copies its pages until `exec`,
//! and `exec` keeps the larger mark), so a child of a test binary running a hundred tests at once
//! reports that binary's size (CI saw 210 MB for an import that peaks at 47 MB). Spawned from
//! this small process instead, the mark is the command's own.

use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("peak-rss: {e}");
            ExitCode::from(125)
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let mut args = std::env::args_os().skip(1);
    let (Some(report), Some(program)) = (args.next(), args.next()) else {
        return Err("usage: peak-rss FILE COMMAND [ARG…]".into());
    };
    let child = std::process::Command::new(&program)
        .args(args)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.to_string_lossy()))?;
    let pid = i32::try_from(child.id()).map_err(|e| e.to_string())?;
    let mut status = 0;
    // SAFETY: a plain FFI call on a zeroed rusage this function owns; the pid is our child's,
    // not yet waited for.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if waited != pid {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    std::fs::write(&report, usage.ru_maxrss.to_string())
        .map_err(|e| format!("cannot write {}: {e}", report.to_string_lossy()))?;
    let status = std::process::ExitStatus::from_raw(status);
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        (None, Some(signal)) => ExitCode::from(u8::try_from(128 + signal).unwrap_or(1)),
        (None, None) => ExitCode::from(1),
    })
}
