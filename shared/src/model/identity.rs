//! Who is asking: the identity behind an API token or an AMQP publisher, its role, and the OS
//! users its tasks may run as.
//!
//! Roles are ordered: `read` sees everything, `operate` also submits, kills, re-runs, runs,
//! backfills, pauses and drains, `admin` also changes jobs, triggers, calendars, routes, worker
//! groups and tokens.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What an identity may do; each role includes the ones below it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads everything.
    Read,
    /// Also submits, kills, re-runs, runs, backfills, pauses, resumes and drains.
    Operate,
    /// Also changes jobs, triggers, calendars, routes, worker groups and tokens.
    Admin,
}

impl Role {
    /// The role's name, as stored and as typed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Operate => "operate",
            Self::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role name that is not one of `read`, `operate`, `admin`.
#[derive(Debug, thiserror::Error)]
#[error("unknown role {0:?}: use read, operate or admin")]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read" => Ok(Self::Read),
            "operate" => Ok(Self::Operate),
            "admin" => Ok(Self::Admin),
            other => Err(UnknownRole(other.to_string())),
        }
    }
}

/// The `execute_users` entry that allows any user.
pub const ANY_USER: &str = "*";

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The token's (or broker user's) name; recorded as a task's `submit_user` and in the audit
    /// trail.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// The OS users its tasks may ask to run as (`*`: any). A task without an `execute_user` runs
    /// as the worker's default user and needs no entry.
    pub execute_users: Vec<String>,
}

impl Identity {
    /// Whether this identity has at least `role`.
    pub fn has(&self, role: Role) -> bool {
        self.role >= role
    }

    /// Whether a task of this identity may ask to run as `user`.
    pub fn may_execute_as(&self, user: &str) -> bool {
        self.execute_users
            .iter()
            .any(|allowed| allowed == ANY_USER || allowed == user)
    }

    /// Why a task of this identity may not run as `execute_user`, if it may not.
    pub fn check_execute_user(&self, execute_user: Option<&str>) -> Result<(), String> {
        match execute_user.filter(|u| !u.is_empty()) {
            Some(user) if !self.may_execute_as(user) => Err(format!(
                "{:?} may not run tasks as execute_user {user:?} (allowed: {})",
                self.name,
                if self.execute_users.is_empty() {
                    "none".to_string()
                } else {
                    self.execute_users.join(", ")
                }
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_include_the_ones_below() {
        let operator = Identity {
            name: "ci".into(),
            role: Role::Operate,
            execute_users: vec!["etl".into()],
        };
        assert!(operator.has(Role::Read) && operator.has(Role::Operate));
        assert!(!operator.has(Role::Admin));
        assert!(operator.check_execute_user(Some("etl")).is_ok());
        assert!(operator.check_execute_user(None).is_ok());
        let refused = operator.check_execute_user(Some("root")).unwrap_err();
        assert!(
            refused.contains("root") && refused.contains("etl"),
            "{refused}"
        );
        assert_eq!("admin".parse::<Role>().unwrap(), Role::Admin);
        assert!("root".parse::<Role>().is_err());
    }
}
