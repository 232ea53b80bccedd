//! Whether a task could reach chime's store or broker without credentials.
//!
//! A root worker runs tasks as another user (`nobody` by default) so that they cannot touch what
//! the worker can. That is worth little if PostgreSQL lets any local process in as any role
//! (`trust` in `pg_hba.conf`), or RabbitMQ lets anyone on loopback in as `guest`: a task would
//! then be a database superuser, mint itself an admin token, or read every task message. So a
//! worker that switches users first tries, without a password, what a task could try:
//!
//! - PostgreSQL over TCP on loopback and on the store's own host, and over the local socket, as
//!   `postgres`, the store's own role and each user tasks may run as;
//! - RabbitMQ as `guest`/`guest` on each node of the broker URL (RabbitMQ admits `guest` from
//!   loopback only, so on the node's own machine).
//!
//! If any of them lets it in, the worker refuses to start, naming the hole and its fix, unless
//! `worker.allow_open_store` says the machine is a throwaway. The socket is tried from the
//! worker's own process: a `peer` line would let a task in only as a role named after its user,
//! so the worker's own name is not tried there.

use std::str::FromStr;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::postgres::PgConnectOptions;

/// How long one probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// Where Debian, Ubuntu and most packages put PostgreSQL's socket.
const SOCKET_DIRS: [&str; 2] = ["/var/run/postgresql", "/tmp"];

/// One way in that needs no credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hole(pub String);

/// The OS accounts that own a store or a broker: a task running as one of them is its
/// administrator (PostgreSQL's `peer` line for `postgres`, RabbitMQ's Erlang cookie).
const SERVER_ACCOUNTS: [&str; 2] = ["postgres", "rabbitmq"];

/// What the probes try, from the worker's settings.
#[derive(Debug, Clone)]
pub struct Probes {
    /// The store's URL (host, port and role are read from it; its password is never used).
    pub database_url: String,
    /// The broker's URL setting (one or more nodes).
    pub amqp_url: String,
    /// The users tasks may run as (`default_user` and `execute_users`; `*`: any but root).
    pub task_users: Vec<String>,
}

/// Tasks that may run as an OS account owning a server on this machine.
fn server_accounts_allowed(task_users: &[String]) -> Vec<Hole> {
    let wildcard = task_users.iter().any(|u| u == "*");
    SERVER_ACCOUNTS
        .iter()
        .filter(|account| {
            (wildcard || task_users.iter().any(|u| u == *account))
                && nix::unistd::User::from_name(account)
                    .ok()
                    .flatten()
                    .is_some()
        })
        .map(|account| {
            Hole(format!(
                "tasks may run as the OS user {account:?}, which administers its server \
                 (worker.execute_users allows it{})",
                if wildcard {
                    " through *: list the users instead"
                } else {
                    ""
                }
            ))
        })
        .collect()
}

/// Every way in the probes found.
pub async fn find_holes(probes: &Probes) -> Vec<Hole> {
    let mut attempts = Vec::new();
    let url = PgConnectOptions::from_str(&probes.database_url).ok();
    let port = url.as_ref().map_or(5432, |o| o.get_port());
    let mut roles = vec!["postgres".to_string()];
    if let Some(role) = url.as_ref().map(|o| o.get_username().to_string()) {
        roles.push(role);
    }
    roles.extend(probes.task_users.iter().filter(|u| *u != "*").cloned());
    roles.sort();
    roles.dedup();
    let mut hosts = vec!["127.0.0.1".to_string(), "::1".to_string()];
    if let Some(host) = url.as_ref().map(|o| o.get_host().to_string())
        && !host.starts_with('/')
    {
        hosts.push(host);
    }
    hosts.sort();
    hosts.dedup();
    let me = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|u| u.name);
    for role in &roles {
        for host in &hosts {
            attempts.push((host.clone(), port, role.clone(), false));
        }
        // Over the socket a `peer` line admits the worker's own user, not a task's.
        if Some(role) != me.as_ref() {
            for dir in SOCKET_DIRS {
                if std::path::Path::new(dir)
                    .join(format!(".s.PGSQL.{port}"))
                    .exists()
                {
                    attempts.push((dir.to_string(), port, role.clone(), true));
                }
            }
        }
    }
    let postgres = attempts
        .into_iter()
        .map(|(host, port, role, socket)| async move {
            let options = PgConnectOptions::new_without_pgpass()
                .host(&host)
                .port(port)
                .username(&role)
                // A password no server has: PGPASSWORD in the worker's environment must not let the
                // probe in where a task would stay out. `trust` never asks for it.
                .password("chime-probe-not-a-password")
                .database("postgres");
            let opened = tokio::time::timeout(PROBE_TIMEOUT, options.connect()).await;
            let open = match opened {
                Ok(Ok(conn)) => {
                    let _ = sqlx::Connection::close(conn).await;
                    true
                }
                // Past authentication: only the database was missing.
                Ok(Err(sqlx::Error::Database(e))) => e.code().as_deref() == Some("3D000"),
                _ => false,
            };
            open.then(|| {
                let place = if socket {
                    format!("its socket in {host}")
                } else {
                    format!("{host}:{port}")
                };
                Hole(format!(
                    "PostgreSQL at {place} lets anyone in as {role:?} without a password"
                ))
            })
        });
    let mut brokers: Vec<String> = chime_core::bus::connection::broker_urls(&probes.amqp_url)
        .into_iter()
        .map(chime_core::bus::connection::node_address)
        .collect();
    brokers.sort();
    brokers.dedup();
    let rabbitmq = brokers.into_iter().map(|node| async move {
        let url = format!("amqp://guest:guest@{node}/%2f");
        let opened = tokio::time::timeout(
            PROBE_TIMEOUT,
            lapin::Connection::connect(&url, lapin::ConnectionProperties::default()),
        )
        .await;
        match opened {
            Ok(Ok(conn)) => {
                let _ = conn.close(200, "probe".into()).await;
                Some(Hole(format!(
                    "RabbitMQ at {node} lets anyone in as guest/guest"
                )))
            }
            _ => None,
        }
    });
    let (postgres, rabbitmq) = futures::future::join(
        futures::future::join_all(postgres),
        futures::future::join_all(rabbitmq),
    )
    .await;
    server_accounts_allowed(&probes.task_users)
        .into_iter()
        .chain(postgres.into_iter().chain(rabbitmq).flatten())
        .collect()
}

/// The refusal a worker that found `holes` prints.
pub fn refusal(holes: &[Hole], task_user: &str) -> String {
    let list: Vec<&str> = holes.iter().map(|h| h.0.as_str()).collect();
    format!(
        "refusing to run tasks as {task_user:?}: a task could reach chime's store or broker \
         without credentials ({}). Require passwords: in pg_hba.conf, scram-sha-256 instead of \
         trust for local and host lines (and give chime a role with a password in \
         CHIME_DATABASE_URL), and on RabbitMQ give chime a user of its own and `rabbitmqctl \
         delete_user guest`. On a throwaway machine, CHIME_WORKER__ALLOW_OPEN_STORE=true \
         (worker.allow_open_store) runs tasks anyway",
        list.join("; ")
    )
}
