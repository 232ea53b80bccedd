//! Who may submit tasks over AMQP (`<prefix>.submit`).
//!
//! A publisher proves who it is with the AMQP `user_id` property, which RabbitMQ itself checks
//! against the user of the publishing connection (a message claiming another user is refused by
//! the broker). chime maps broker users to roles and allowed execute users (`[amqp_users.NAME]`).
//! When authentication is on (an API token exists, `CHIME_API_TOKEN` is set, or `amqp_users` is
//! configured), a submission without a mapped user of at least `operate`, or asking for an
//! execute user its user may not have, is dead-lettered with the reason. Either way the task's
//! `submit_user` is the validated broker user when there is one.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chime_core::config::AmqpUser;
use chime_core::model::{Identity, NewTask, Role};
use chime_core::store::{Store, tokens};

/// How long "is authentication on?" is cached: a token created or the last one revoked takes
/// effect for AMQP submissions within this.
const AUTH_CHECK_TTL: Duration = Duration::from_secs(5);

/// The submission policy of one worker.
#[derive(Debug)]
pub struct Submitters {
    users: BTreeMap<String, AmqpUser>,
    bootstrap_token: bool,
    auth_on: Mutex<Option<(Instant, bool)>>,
}

impl Submitters {
    /// The policy from the worker's settings.
    pub fn new(users: BTreeMap<String, AmqpUser>, bootstrap_token: bool) -> Self {
        Self {
            users,
            bootstrap_token,
            auth_on: Mutex::new(None),
        }
    }

    async fn auth_on(&self, store: &Store) -> Result<bool, chime_core::store::StoreError> {
        if self.bootstrap_token || !self.users.is_empty() {
            return Ok(true);
        }
        if let Ok(cached) = self.auth_on.lock()
            && let Some((at, on)) = *cached
            && at.elapsed() < AUTH_CHECK_TTL
        {
            return Ok(on);
        }
        let on = tokens::any_live(store).await?;
        if let Ok(mut cached) = self.auth_on.lock() {
            *cached = Some((Instant::now(), on));
        }
        Ok(on)
    }

    /// Admits `task` from broker user `user_id` (setting its `submit_user`), or says why not.
    /// `Err(Ok(reason))`: refused; `Err(Err(_))`: the database could not say whether
    /// authentication is on (try again later).
    pub async fn admit(
        &self,
        store: &Store,
        user_id: Option<&str>,
        task: &mut NewTask,
    ) -> Result<(), Result<String, chime_core::store::StoreError>> {
        let user_id = user_id.filter(|u| !u.is_empty());
        if !self.auth_on(store).await.map_err(Err)? {
            if let Some(user) = user_id {
                task.submit_user = Some(user.to_string());
            }
            return Ok(());
        }
        let Some(user) = user_id else {
            return Err(Ok(
                "this submission has no AMQP user_id property: authentication is \
                           on, so set user_id to the broker user the publisher connects as, and \
                           map that user in chime's amqp_users setting"
                    .to_string(),
            ));
        };
        let Some(mapped) = self.users.get(user) else {
            return Err(Ok(format!(
                "broker user {user:?} is not mapped in chime's amqp_users setting, so it may \
                 not submit"
            )));
        };
        let identity = Identity {
            name: user.to_string(),
            role: mapped.role,
            execute_users: mapped.execute_users.clone(),
        };
        if !identity.has(Role::Operate) {
            return Err(Ok(format!(
                "broker user {user:?} has the {} role; submitting needs operate",
                identity.role
            )));
        }
        identity
            .check_execute_user(task.execute_user.as_deref())
            .map_err(Ok)?;
        task.submit_user = Some(user.to_string());
        Ok(())
    }
}
