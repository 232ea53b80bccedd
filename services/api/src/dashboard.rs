//! The web dashboard: one embedded page (no build step) that reads the API and follows
//! `/api/v1/events`. Every page has its own URL (`/jobs/{group}/{name}`, `/tasks/{id}`, …), each
//! served the same page, which routes in the browser. The page holds no data: it is public, and
//! every call it makes carries the token the user signs in with.

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rust_embed::RustEmbed;

use crate::state::AppState;

#[derive(RustEmbed)]
#[folder = "assets/"]
struct Assets;

/// The dashboard's pages, as axum paths.
const PAGES: &[&str] = &[
    "/",
    "/jobs",
    "/jobs/{group}/{name}",
    "/triggers",
    "/calendars",
    "/tasks",
    "/tasks/{id}",
    "/dependencies",
    "/backfills",
    "/workers",
    "/schedulers",
];

/// Whether `path` is one of the dashboard's pages or its script.
pub fn is_page(path: &str) -> bool {
    if path == SCRIPT {
        return true;
    }
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    match segments.as_slice() {
        [""] => true,
        [page] => matches!(
            *page,
            "jobs"
                | "triggers"
                | "calendars"
                | "tasks"
                | "dependencies"
                | "backfills"
                | "workers"
                | "schedulers"
        ),
        ["jobs", group, name] => !group.is_empty() && !name.is_empty(),
        ["tasks", id] => !id.is_empty(),
        _ => false,
    }
}

/// Where the page's script is served.
const SCRIPT: &str = "/app.js";

/// The dashboard's routes.
pub fn routes() -> Router<AppState> {
    PAGES
        .iter()
        .fold(Router::new(), |router, page| router.route(page, get(index)))
        .route(SCRIPT, get(script))
}

/// Serves the page's script.
pub async fn script() -> Response {
    match Assets::get("app.js") {
        Some(script) => (
            [
                (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            script.data.into_owned(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "dashboard not built in").into_response(),
    }
}

/// Serves the dashboard page.
pub async fn index() -> Response {
    match Assets::get("index.html") {
        Some(page) => (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                // The page runs only its own script and talks only to this API.
                (
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; \
                     connect-src 'self'; img-src 'self' data:; \
                     frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
                ),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                (header::REFERRER_POLICY, "no-referrer"),
            ],
            page.data.into_owned(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "dashboard not built in").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::is_page;

    #[test]
    fn pages_are_known_paths() {
        for page in [
            "/",
            "/jobs",
            "/jobs/g/n",
            "/tasks/0199",
            "/schedulers",
            "/app.js",
        ] {
            assert!(is_page(page), "{page}");
        }
        for other in ["/api/v1/tasks", "/jobs/g", "/metrics", "/tasks/", "/x"] {
            assert!(!is_page(other), "{other}");
        }
    }
}
