//! `chime webhook`: failure notifications, POSTed when a task fails for good.

use anyhow::Result;
use chime_core::store::webhooks::WebhookView;
use clap::Subcommand;

use crate::client::ApiClient;
use crate::output::{opt, table};

/// `chime webhook …`
#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Adds a webhook: a JSON POST to URL whenever a task (or one job's task) fails for good,
    /// retried until the receiver answers 2xx.
    Add {
        /// Where to POST (http or https).
        url: String,
        /// Only this job's failures (`group.name`, or `name` in the default group).
        #[arg(long)]
        job: Option<String>,
        /// The job's group, when its group has a dot in it (`--job` is then the name alone).
        #[arg(long, requires = "job")]
        job_group: Option<String>,
    },
    /// Lists webhooks with their delivered and pending counts.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Removes a webhook.
    Delete {
        /// Its id.
        id: i64,
    },
}

/// Runs a `chime webhook` verb.
pub async fn webhook(client: &ApiClient, command: WebhookCommand) -> Result<()> {
    match command {
        WebhookCommand::Add {
            url,
            job,
            job_group,
        } => {
            let (_, hook): (_, WebhookView) = client
                .post(
                    "/api/v1/webhooks",
                    &serde_json::json!({ "url": url, "job": job, "job_group": job_group }),
                )
                .await?;
            println!("{}", hook.id);
        }
        WebhookCommand::List { json } => {
            let hooks: Vec<WebhookView> = client.get("/api/v1/webhooks").await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&hooks)?);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = hooks
                .iter()
                .map(|h| {
                    vec![
                        h.id.to_string(),
                        opt(h.job.as_deref()),
                        h.url.clone(),
                        h.delivered.to_string(),
                        h.pending.to_string(),
                        h.gave_up.to_string(),
                        opt(h.last_error.as_deref()),
                    ]
                })
                .collect();
            table(
                &[
                    "ID",
                    "JOB",
                    "URL",
                    "DELIVERED",
                    "PENDING",
                    "GAVE UP",
                    "LAST ERROR",
                ],
                &rows,
            );
        }
        WebhookCommand::Delete { id } => {
            client.delete(&format!("/api/v1/webhooks/{id}")).await?;
        }
    }
    Ok(())
}
