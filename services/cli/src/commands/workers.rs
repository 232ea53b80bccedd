//! `chime workers`: the worker registry; `chime route`: which group runs which kind.

use anyhow::Result;
use chime_core::store::kind_routes::KindRoute;
use chime_core::store::workers::WorkerView;

use crate::client::ApiClient;
use crate::output::{table, time};

/// Asks worker `id` to drain.
pub async fn drain(client: &ApiClient, worker: &str) -> Result<()> {
    let id = resolve(client, worker).await?;
    let (_, _): (_, serde_json::Value) = client
        .post(
            &format!("/api/v1/workers/{id}/drain"),
            &serde_json::json!({}),
        )
        .await?;
    println!("{id} drain requested");
    Ok(())
}

/// A worker as a person names it: its name (as `chime workers` lists it), its id, or the start
/// of its id (at least 8 hex digits). A name several workers have had picks the live one.
async fn resolve(client: &ApiClient, text: &str) -> Result<uuid::Uuid> {
    if let Ok(id) = text.parse::<uuid::Uuid>() {
        return Ok(id);
    }
    let workers: Vec<WorkerView> = client.get("/api/v1/workers").await?;
    let mut matches: Vec<&WorkerView> = workers.iter().filter(|w| w.name == text).collect();
    if matches.len() > 1 {
        // A name reused by a restarted process: the live one is meant.
        matches.retain(|w| matches!(w.status.as_str(), "online" | "draining" | "disconnected"));
    }
    if matches.is_empty()
        && let Ok(prefix) = text.parse::<chime_core::store::tasks::IdPrefix>()
    {
        matches = workers
            .iter()
            .filter(|w| (prefix.first..=prefix.last).contains(&w.id))
            .collect();
    }
    match matches.as_slice() {
        [] => Err(crate::BadInput(format!(
            "no worker is named {text} or has an id starting with it (see `chime workers`)"
        ))
        .into()),
        [one] => Ok(one.id),
        several => Err(crate::BadInput(format!(
            "{text} names {} workers ({}): give its whole id",
            several.len(),
            several
                .iter()
                .map(|w| w.id.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into()),
    }
}

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
                w.inline_concurrency.to_string(),
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
            "PROCESS SLOTS",
            "INLINE SLOTS",
            "LAST HEARTBEAT",
        ],
        &rows,
    );
    Ok(())
}

/// Routes `kind` to `group`.
pub async fn set_route(client: &ApiClient, kind: &str, group: &str) -> Result<()> {
    let route: KindRoute = client
        .put(
            &format!("/api/v1/kind-routes/{}", super::path_segment(kind)),
            &serde_json::json!({ "worker_group": group }),
        )
        .await?;
    println!("{} -> {}", route.kind, route.worker_group);
    Ok(())
}

/// Lists the kind routes.
pub async fn list_routes(client: &ApiClient, json: bool) -> Result<()> {
    let routes: Vec<KindRoute> = client.get("/api/v1/kind-routes").await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&routes)?);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = routes
        .iter()
        .map(|r| vec![r.kind.clone(), r.worker_group.clone()])
        .collect();
    table(&["KIND", "GROUP"], &rows);
    Ok(())
}

/// Removes `kind`'s route.
pub async fn delete_route(client: &ApiClient, kind: &str) -> Result<()> {
    client
        .delete(&format!(
            "/api/v1/kind-routes/{}",
            super::path_segment(kind)
        ))
        .await
}
