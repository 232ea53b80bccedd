//! `execute_user`: which Unix user a command runs as.
//!
//! A worker running as root never runs a task as root by accident: a task without an
//! `execute_user` runs as the worker's `default_user` (`nobody` unless configured), and a task
//! that asks for a user gets it only if the worker's `execute_users` lists it (`*` allows any user
//! but root; root must be listed by name). The switch happens in the child before exec: setgid,
//! then setuid, dropping supplementary groups.
//!
//! A worker running as anyone else runs only tasks that ask for its own user (or none). Anything
//! else is refused, which rejects the attempt so a worker that may switch users can take it.

use nix::unistd::{Gid, Uid, User};

/// The user a command runs as.
#[derive(Debug, Clone)]
pub struct RunAs {
    /// Its name (for USER and LOGNAME).
    pub name: String,
    /// Its uid.
    pub uid: Uid,
    /// Its primary gid.
    pub gid: Gid,
    /// Its home directory.
    pub home: std::path::PathBuf,
    /// Whether it is another user than the worker's (the child must switch to it).
    pub switch: bool,
}

/// Which users a worker's tasks may run as.
#[derive(Debug, Clone)]
pub struct UserPolicy {
    /// A root worker's user for tasks that name none.
    pub default_user: String,
    /// The users a task may ask for (`*`: any but root).
    pub allowed: Vec<String>,
}

impl UserPolicy {
    /// The user a task asking for `execute_user` runs as, or why this worker may not run it.
    pub fn resolve(&self, execute_user: Option<&str>) -> Result<RunAs, String> {
        let me = Uid::effective();
        let asked = execute_user.filter(|name| !name.is_empty());
        if !me.is_root() {
            let own = lookup_uid(me)?;
            return match asked {
                None => Ok(own),
                Some(name) if name == own.name => Ok(own),
                Some(name) => Err(format!(
                    "execute_user {name:?} is not allowed: this worker runs as {:?}, not root",
                    own.name
                )),
            };
        }
        let name = match asked {
            None => self.default_user.as_str(),
            Some(name) => {
                let listed = self.allowed.iter().any(|u| u == name);
                let wildcard = name != "root" && self.allowed.iter().any(|u| u == "*");
                if !(listed || wildcard) {
                    return Err(format!(
                        "execute_user {name:?} is not in this worker's allowed users \
                         (worker.execute_users: {})",
                        if self.allowed.is_empty() {
                            "none".to_string()
                        } else {
                            self.allowed.join(", ")
                        }
                    ));
                }
                name
            }
        };
        let mut user = lookup_name(name)?;
        // Root by any name (another account with uid 0, or a default user that is root) only
        // when root is listed by name.
        if user.uid.is_root() && !self.allowed.iter().any(|u| u == "root") {
            return Err(format!(
                "{name:?} is root (uid 0), which this worker allows only if worker.execute_users \
                 lists root"
            ));
        }
        user.switch = user.uid != me;
        Ok(user)
    }
}

fn run_as(user: User) -> RunAs {
    RunAs {
        name: user.name,
        uid: user.uid,
        gid: user.gid,
        home: user.dir,
        switch: false,
    }
}

fn lookup_name(name: &str) -> Result<RunAs, String> {
    match User::from_name(name) {
        Ok(Some(user)) => Ok(run_as(user)),
        Ok(None) => Err(format!("user {name:?} does not exist on this worker")),
        Err(error) => Err(format!("cannot look up user {name:?}: {error}")),
    }
}

fn lookup_uid(uid: Uid) -> Result<RunAs, String> {
    match User::from_uid(uid) {
        Ok(Some(user)) => Ok(run_as(user)),
        // A uid with no passwd entry (a container's arbitrary uid) still runs its own tasks.
        Ok(None) => Ok(RunAs {
            name: uid.to_string(),
            uid,
            gid: nix::unistd::Gid::effective(),
            home: std::path::PathBuf::from("/"),
            switch: false,
        }),
        Err(error) => Err(format!("cannot look up the worker's own user: {error}")),
    }
}
