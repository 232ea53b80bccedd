//! `execute_user`: which Unix user a command runs as.
//!
//! A worker running as root switches to the task's user (setgid, then setuid, dropping
//! supplementary groups) in the child before exec. A worker running as anyone else runs only tasks
//! that ask for its own user (or none): anything else is refused, which rejects the attempt so a
//! worker that may switch users can take it.

use nix::unistd::{Gid, Uid, User};

/// The user a command switches to.
#[derive(Debug, Clone)]
pub struct RunAs {
    /// Its name (for HOME, USER and LOGNAME).
    pub name: String,
    /// Its uid.
    pub uid: Uid,
    /// Its primary gid.
    pub gid: Gid,
    /// Its home directory.
    pub home: std::path::PathBuf,
}

/// `Ok(None)`: run as the worker's own user. `Ok(Some(user))`: switch to `user`. `Err(why)`: this
/// worker may not run the task as that user.
pub fn resolve(execute_user: Option<&str>) -> Result<Option<RunAs>, String> {
    let Some(name) = execute_user.filter(|name| !name.is_empty()) else {
        return Ok(None);
    };
    let user = match User::from_name(name) {
        Ok(Some(user)) => user,
        Ok(None) => {
            return Err(format!(
                "execute_user {name:?} does not exist on this worker"
            ));
        }
        Err(error) => return Err(format!("cannot look up execute_user {name:?}: {error}")),
    };
    let me = Uid::effective();
    if user.uid == me {
        return Ok(None);
    }
    if !me.is_root() {
        return Err(format!(
            "execute_user {name:?} is not allowed: this worker does not run as root"
        ));
    }
    Ok(Some(RunAs {
        name: user.name,
        uid: user.uid,
        gid: user.gid,
        home: user.dir,
    }))
}
