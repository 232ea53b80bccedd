//! `chime token`: API tokens and their roles; `chime audit`: who changed what.

use anyhow::Result;
use chime_core::model::Role;
use chime_core::store::audit::AuditEvent;
use chime_core::store::tokens::{CreatedToken, TokenView};
use clap::Subcommand;

use crate::client::ApiClient;
use crate::output::{table, time};

/// `chime token …`
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Creates a token and prints its secret, once: keep it.
    Create {
        /// Its name (recorded as the submit_user of its tasks and in the audit trail).
        name: String,
        /// read, operate (submit, kill, rerun, run, pause, backfill, drain) or admin.
        #[arg(long)]
        role: Role,
        /// An OS user its tasks may ask to run as (repeat; `*` for any).
        #[arg(long = "execute-user")]
        execute_users: Vec<String>,
    },
    /// Lists the live tokens (never their secrets).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revokes a token: it stops working at once.
    Revoke {
        /// Its name.
        name: String,
    },
}

/// Runs a `chime token` verb.
pub async fn token(client: &ApiClient, command: TokenCommand) -> Result<()> {
    match command {
        TokenCommand::Create {
            name,
            role,
            execute_users,
        } => {
            let (_, created): (_, CreatedToken) = client
                .post(
                    "/api/v1/tokens",
                    &serde_json::json!({
                        "name": name, "role": role, "execute_users": execute_users,
                    }),
                )
                .await?;
            eprintln!(
                "token {:?} ({}) created; its secret is printed once, below:",
                created.token.name, created.token.role
            );
            println!("{}", created.secret);
            Ok(())
        }
        TokenCommand::List { json } => {
            let tokens: Vec<TokenView> = client.get("/api/v1/tokens").await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&tokens)?);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = tokens
                .iter()
                .map(|t| {
                    vec![
                        t.name.clone(),
                        t.role.to_string(),
                        t.execute_users.join(","),
                        t.created_by.clone(),
                        time(Some(t.created_at)),
                    ]
                })
                .collect();
            table(
                &["NAME", "ROLE", "EXECUTE USERS", "CREATED BY", "CREATED"],
                &rows,
            );
            Ok(())
        }
        TokenCommand::Revoke { name } => {
            client
                .delete(&format!("/api/v1/tokens/{}", super::path_segment(&name)))
                .await?;
            eprintln!("token {name:?} revoked");
            Ok(())
        }
    }
}

/// `chime audit`: the newest changes.
pub async fn audit(
    client: &ApiClient,
    actor: Option<String>,
    target: Option<String>,
    limit: u32,
    json: bool,
) -> Result<()> {
    let mut path = format!("/api/v1/audit?limit={limit}");
    if let Some(actor) = actor {
        path.push_str(&format!("&actor={}", super::path_segment(&actor)));
    }
    if let Some(target) = target {
        path.push_str(&format!("&target={}", super::path_segment(&target)));
    }
    let events: Vec<AuditEvent> = client.get(&path).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&events)?);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|e| {
            vec![
                time(Some(e.at)),
                e.actor.clone(),
                e.action.clone(),
                e.object.clone().unwrap_or_default(),
                e.target.clone(),
                e.status.to_string(),
                super::jobs::describe_changes(&e.changes),
            ]
        })
        .collect();
    table(
        &[
            "AT", "ACTOR", "ACTION", "TARGET", "PATH", "STATUS", "CHANGES",
        ],
        &rows,
    );
    Ok(())
}
