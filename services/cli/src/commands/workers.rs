//! `chime workers`: the worker registry.

use anyhow::Result;
use chime_core::store::workers::WorkerView;

use crate::client::ApiClient;
use crate::output::{table, time};

/// Lists workers.
pub async fn list(client: &ApiClient, json: bool) -> Result<()> {
    let workers: Vec<WorkerView> = client.get("/api/v1/workers").await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&workers)?);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = workers
        .iter()
        .map(|w| {
            vec![
                w.name.clone(),
                w.status.clone(),
                w.groups.join(","),
                w.kinds.join(","),
                w.concurrency.to_string(),
                time(Some(w.last_heartbeat)),
            ]
        })
        .collect();
    table(
        &[
            "NAME",
            "STATUS",
            "GROUPS",
            "KINDS",
            "CONCURRENCY",
            "LAST HEARTBEAT",
        ],
        &rows,
    );
    Ok(())
}
