//! `chime group`: the declared worker groups (each one a queue workers consume).

use anyhow::Result;
use chime_core::store::worker_groups::WorkerGroupView;
use clap::Subcommand;

use crate::client::ApiClient;
use crate::output::table;

/// `chime group …`
#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// Declares a worker group, so tasks, jobs and routes may name it.
    Create {
        /// Its name.
        name: String,
        /// What it is for.
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Lists the worker groups with their online workers, jobs and live tasks.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Deletes a group no job, route or live task uses.
    Delete {
        /// Its name.
        name: String,
    },
}

/// Runs a `chime group` verb.
pub async fn group(client: &ApiClient, command: GroupCommand) -> Result<()> {
    match command {
        GroupCommand::Create { name, description } => {
            let (_, group): (_, WorkerGroupView) = client
                .post(
                    "/api/v1/worker-groups",
                    &serde_json::json!({ "name": name, "description": description }),
                )
                .await?;
            println!("{}", group.name);
            Ok(())
        }
        GroupCommand::List { json } => {
            let groups: Vec<WorkerGroupView> = client.get("/api/v1/worker-groups").await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&groups)?);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = groups
                .iter()
                .map(|g| {
                    vec![
                        g.name.clone(),
                        g.workers_online.to_string(),
                        g.jobs.to_string(),
                        g.live_tasks.to_string(),
                        g.description.clone(),
                    ]
                })
                .collect();
            table(
                &[
                    "NAME",
                    "WORKERS ONLINE",
                    "JOBS",
                    "LIVE TASKS",
                    "DESCRIPTION",
                ],
                &rows,
            );
            Ok(())
        }
        GroupCommand::Delete { name } => {
            client
                .delete(&format!(
                    "/api/v1/worker-groups/{}",
                    super::path_segment(&name)
                ))
                .await?;
            eprintln!("worker group {name} deleted");
            Ok(())
        }
    }
}
