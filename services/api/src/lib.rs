//! chime-api: the REST API under `/api/v1` (OpenAPI document at `/api/v1/openapi.json`), the web
//! dashboard at `/`, Prometheus metrics at `/metrics`, and `/healthz` / `/readyz`.
//!
//! Who may call what is in [`auth`]: with tokens, every call but the health checks needs
//! `Authorization: Bearer <token>` and the role its route asks for. Every error is a 4xx/5xx with
//! a JSON body `{"error": "…"}`.

pub mod auth;
pub mod dashboard;
pub mod error;
pub mod events;
pub mod http_server;
pub mod limits;
pub mod routes;
pub mod state;
pub mod submissions;
pub mod task_waits;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::middleware::Next;
use axum::routing::get;
use chime_core::Node;
use chime_core::model::MAX_PAYLOAD_BYTES;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::trace::TraceLayer;
use tracing::info;
use utoipa::OpenApi;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

pub use state::AppState;

/// The largest request body: a task's spec and data may take [`MAX_PAYLOAD_BYTES`]; the rest is
/// room for the other fields, so the submission check (413 with the sizes) answers first.
const MAX_BODY_BYTES: usize = 2 * MAX_PAYLOAD_BYTES;

/// The largest `POST /api/v1/tasks/batch` body, and the largest definitions document.
const MAX_BATCH_BODY_BYTES: usize = 16 * 1024 * 1024;

/// The API could not start.
#[derive(Debug, thiserror::Error)]
pub enum ApiStartError {
    /// The listen address is taken or invalid.
    #[error("listening on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Listening beyond loopback with no token would open the workers to anyone.
    #[error(
        "refusing to listen on {addr} with no API token: anyone who reaches it could run commands \
         on the workers. Set CHIME_API_TOKEN (or create one with `chime token create NAME --role \
         admin` on a loopback API first), listen on 127.0.0.1, or pass --insecure-no-auth if a \
         proxy in front does the authentication"
    )]
    NoToken {
        /// The address.
        addr: String,
    },
    /// The store could not record the bootstrap token.
    #[error("{0}")]
    Store(#[source] chime_core::store::StoreError),
    /// The server failed.
    #[error("serving HTTP: {0}")]
    Serve(#[source] std::io::Error),
}

#[derive(OpenApi)]
#[openapi(
    info(title = "chime", description = "chime's REST API: tasks, jobs, triggers, workers."),
    tags(
        (name = "tasks", description = "ad-hoc tasks and task history"),
        (name = "schedule", description = "the schedule engine"),
        (name = "jobs"), (name = "triggers"), (name = "calendars"), (name = "schedulers"),
        (name = "workers"),
        (name = "definitions", description = "definitions as code: the store's as one document"),
        (name = "access", description = "API tokens and the audit trail (admin)")
    )
)]
struct ApiDoc;

/// The REST API's routes, with their OpenAPI description (no state yet).
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(
            routes::tasks::create_task,
            routes::tasks::list_tasks
        ))
        // A batch takes up to 1,000 submissions; each is still held to its own limit.
        .routes(
            routes!(routes::tasks::create_tasks).layer(DefaultBodyLimit::max(MAX_BATCH_BODY_BYTES)),
        )
        .routes(routes!(routes::tasks::get_task))
        .routes(routes!(routes::logs::task_logs))
        .routes(routes!(events::task_events))
        .routes(routes!(task_waits::wait_tasks))
        .routes(routes!(routes::overview::overview))
        .routes(routes!(routes::overview::dependency_grid))
        .routes(routes!(routes::backfills::list_backfills))
        .routes(routes!(routes::backfills::get_backfill))
        .routes(routes!(routes::backfills::cancel_backfill))
        .routes(routes!(routes::tasks::kill_task))
        .routes(routes!(routes::workers::list_workers))
        .routes(routes!(routes::workers::drain_worker))
        .routes(routes!(routes::workers::list_kind_routes))
        .routes(routes!(
            routes::workers::set_kind_route,
            routes::workers::delete_kind_route
        ))
        .routes(routes!(routes::schedule::preview_schedule))
        .routes(routes!(routes::definitions::export_definitions))
        .routes(
            routes!(routes::definitions::plan_definitions)
                .layer(DefaultBodyLimit::max(MAX_BATCH_BODY_BYTES)),
        )
        .routes(
            routes!(routes::definitions::apply_definitions)
                .layer(DefaultBodyLimit::max(MAX_BATCH_BODY_BYTES)),
        )
        .routes(routes!(routes::jobs::create_job, routes::jobs::list_jobs))
        .routes(routes!(
            routes::jobs::get_job,
            routes::jobs::update_job,
            routes::jobs::patch_job,
            routes::jobs::delete_job
        ))
        .routes(routes!(routes::jobs::run_job))
        .routes(routes!(routes::jobs::rerun_job_tasks))
        .routes(routes!(routes::jobs::kill_job_tasks))
        .routes(routes!(
            routes::jobs::list_dependencies,
            routes::jobs::add_dependency
        ))
        .routes(routes!(routes::jobs::remove_dependency))
        .routes(routes!(routes::jobs::backfill_job))
        .routes(routes!(routes::tasks::rerun_task))
        .routes(routes!(routes::jobs::job_action))
        .routes(routes!(routes::jobs::trigger_action))
        .routes(routes!(routes::jobs::group_action))
        .routes(routes!(
            routes::jobs::create_trigger,
            routes::jobs::list_triggers
        ))
        .routes(routes!(
            routes::jobs::get_trigger,
            routes::jobs::update_trigger,
            routes::jobs::patch_trigger,
            routes::jobs::delete_trigger
        ))
        .routes(routes!(
            routes::jobs::create_calendar,
            routes::jobs::list_calendars
        ))
        .routes(routes!(
            routes::jobs::update_calendar,
            routes::jobs::delete_calendar
        ))
        .routes(routes!(routes::jobs::list_schedulers))
        .routes(routes!(routes::jobs::list_services))
        .routes(routes!(
            routes::worker_groups::create_group,
            routes::worker_groups::list_groups
        ))
        .routes(routes!(
            routes::worker_groups::get_group,
            routes::worker_groups::delete_group
        ))
        .routes(routes!(
            routes::access::create_token,
            routes::access::list_tokens
        ))
        .routes(routes!(routes::access::revoke_token))
        .routes(routes!(routes::access::list_audit))
        .routes(routes!(routes::retention::prune))
        .routes(routes!(
            routes::webhooks::add_webhook,
            routes::webhooks::list_webhooks
        ))
        .routes(routes!(routes::webhooks::delete_webhook))
}

/// The REST API's OpenAPI document, as `GET /api/v1/openapi.json` serves it (the book's API
/// reference is generated from it: `chime docs`).
pub fn openapi() -> utoipa::openapi::OpenApi {
    api_routes().split_for_parts().1
}

/// The whole application: API, OpenAPI document, dashboard, health and metrics.
pub fn router(state: AppState) -> Router {
    let (api, openapi) = api_routes().split_for_parts();
    // Serialized once and shared: a request clones a reference count, not the document.
    let openapi_json = axum::body::Bytes::from(serde_json::to_vec(&openapi).unwrap_or_default());
    let api = api.route(
        "/api/v1/openapi.json",
        get(move || {
            std::future::ready((
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                openapi_json.clone(),
            ))
        }),
    );
    let app = Router::new()
        .merge(api)
        .merge(dashboard::routes())
        .route("/healthz", get(routes::health::healthz))
        .route("/readyz", get(routes::health::readyz))
        .route("/metrics", get(routes::health::metrics))
        .fallback(|| async { error::ApiError::not_found("no such route") })
        // Inside authorization: a body is read only for a caller that may make the call.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            |State(state): State<AppState>, request: axum::extract::Request, next: Next| async move {
                // A batch, or a definitions document (a thousand jobs is about 1 MB of JSON):
                // large, so they share the room batches take.
                let path = request.uri().path();
                let batch = path == "/api/v1/tasks/batch"
                    || path == "/api/v1/definitions/plan"
                    || path == "/api/v1/definitions/apply";
                let limit = if batch { MAX_BATCH_BODY_BYTES } else { MAX_BODY_BYTES };
                limits::read_body_in_time(&state.batch_bytes, limit, batch, request, next).await
            },
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authorize,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        // A 5xx is logged where it is made (ApiError, with its reason); a 503 from /readyz is an
        // answer, not a failure of the API, so the trace layer keeps failures at debug.
        .layer(
            TraceLayer::new_for_http().on_failure(
                tower_http::trace::DefaultOnFailure::new().level(tracing::Level::DEBUG),
            ),
        )
        .with_state(state);
    // Around the router, not inside it: a path rewritten there would be rewritten after routing.
    // The outer router has no routes; its layer runs before the inner one routes.
    Router::new()
        .fallback_service(app)
        .layer(axum::middleware::from_fn(names_in_nfc))
}

/// Takes the names in a request's path in their composed form (NFC), as the API's bodies are
/// (`chime_core::model::names`): a job made as `café` is found as `cafe` with a combining accent.
async fn names_in_nfc(mut request: axum::extract::Request, next: Next) -> axum::response::Response {
    let uri = request.uri();
    if uri.path().contains('%') {
        let mut changed = false;
        let path: Vec<String> = uri
            .path()
            .split('/')
            .map(|segment| {
                let decoded = percent_encoding::percent_decode_str(segment).decode_utf8();
                match decoded {
                    Ok(name) if !name.is_ascii() => {
                        let composed = chime_core::model::names::nfc(&name);
                        if composed == name {
                            return segment.to_string();
                        }
                        changed = true;
                        percent_encoding::utf8_percent_encode(
                            &composed,
                            percent_encoding::NON_ALPHANUMERIC,
                        )
                        .to_string()
                    }
                    _ => segment.to_string(),
                }
            })
            .collect();
        if changed {
            let rewritten = match uri.query() {
                Some(query) => format!("{}?{query}", path.join("/")),
                None => path.join("/"),
            };
            if let Ok(rewritten) = rewritten.parse() {
                *request.uri_mut() = rewritten;
            }
        }
    }
    next.run(request).await
}

/// The state for an API of `node` served on `listener`.
pub fn state(node: &Node, listener: &TcpListener) -> AppState {
    let loopback = listener
        .local_addr()
        .is_ok_and(|addr| addr.ip().is_loopback());
    AppState {
        store: node.store.clone(),
        broker: node.broker.clone(),
        auth_required: node.settings.api_token.is_some()
            || (!loopback && !node.settings.insecure_no_auth),
        loopback,
        metrics_public: node.settings.metrics_public,
        metrics: chime_core::telemetry::metrics_handle(),
        token_check: Default::default(),
        submissions: submissions::Submissions::start(
            node.store.clone(),
            node.broker.topology().clone(),
            node.local_worker.clone(),
        ),
        events: events::TaskEvents::new(node.store.clone(), node.broker.clone()),
        ends: task_waits::TaskEnds::new(node.broker.clone()),
        streams: Default::default(),
        batch_bytes: Default::default(),
        shutdown: CancellationToken::new(),
    }
}

/// Binds `addr`. Beyond loopback, an API with no token (neither `CHIME_API_TOKEN` nor one in the
/// store) would let anyone who reaches it run commands on the workers: that is refused unless
/// `insecure_no_auth`.
pub async fn bind(node: &Node, addr: &str) -> Result<TcpListener, ApiStartError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ApiStartError::Bind {
            addr: addr.to_string(),
            source,
        })?;
    if let Some(secret) = &node.settings.api_token {
        chime_core::store::tokens::ensure_bootstrap(&node.store, secret)
            .await
            .map_err(ApiStartError::Store)?;
    }
    let loopback = listener
        .local_addr()
        .is_ok_and(|addr| addr.ip().is_loopback());
    if !loopback && node.settings.api_token.is_none() && !node.settings.insecure_no_auth {
        let any_token = chime_core::store::tokens::any_live(&node.store)
            .await
            .unwrap_or(false);
        if !any_token {
            return Err(ApiStartError::NoToken {
                addr: addr.to_string(),
            });
        }
    }
    Ok(listener)
}

/// Serves on `listener` until `shutdown`, then finishes in-flight requests.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: CancellationToken,
) -> Result<(), ApiStartError> {
    match listener.local_addr() {
        Ok(addr) => info!(%addr, "API listening on http://{addr}"),
        Err(_) => info!("API listening"),
    }
    let state = AppState {
        shutdown: shutdown.clone(),
        ..state
    };
    chime_core::telemetry::catalog::register_at_zero(
        chime_core::telemetry::catalog::Role::Api,
        &[],
        &[],
    );
    // The instance checks in while it serves, so `chime services` and the overview count it.
    let check_in = chime_core::store::services::CheckIn::new(
        &state.store,
        "api",
        chime_core::store::services::instance_id(),
        chime_core::store::services::CHECKIN_INTERVAL,
    );
    let checkins = tokio::spawn(check_in.run(shutdown.clone()));
    let served = http_server::serve(listener, router(state), shutdown)
        .await
        .map_err(ApiStartError::Serve);
    let _ = checkins.await;
    served
}

/// Serves this process's Prometheus metrics (`GET /metrics`) and its health (`/healthz`, and
/// `/readyz`: the database answers and the broker is connected) on `listener` until `shutdown`:
/// how `chime scheduler`, `chime worker` and `chime dependency` expose theirs (`--metrics-addr`),
/// and what their container health checks ask. Carries no task data; bind it where only the
/// scraper and the orchestrator reach.
pub async fn serve_metrics(
    listener: TcpListener,
    node: std::sync::Arc<Node>,
    shutdown: CancellationToken,
) -> Result<(), ApiStartError> {
    let handle = chime_core::telemetry::metrics_handle();
    let ready = move || {
        let node = node.clone();
        async move { routes::health::readiness(&node.store, &node.broker).await }
    };
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let body = handle
                    .as_ref()
                    .map(|h| {
                        h.run_upkeep();
                        h.render()
                    })
                    .unwrap_or_default();
                std::future::ready((
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4",
                    )],
                    body,
                ))
            }),
        )
        .route("/healthz", get(routes::health::healthz))
        .route("/readyz", get(ready));
    match listener.local_addr() {
        Ok(addr) => info!(%addr, "metrics listening on http://{addr}/metrics"),
        Err(_) => info!("metrics listening"),
    }
    http_server::serve(listener, app, shutdown)
        .await
        .map_err(ApiStartError::Serve)
}

/// Runs the API of `node` on its configured address until `shutdown`.
pub async fn run(node: &Node, shutdown: CancellationToken) -> Result<(), ApiStartError> {
    let listener = bind(node, &node.settings.api_addr).await?;
    let state = state(node, &listener);
    serve(listener, state, shutdown).await
}
