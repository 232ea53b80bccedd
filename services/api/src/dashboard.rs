//! The web dashboard: one embedded page that reads the API.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;

#[derive(RustEmbed)]
#[folder = "assets/"]
struct Assets;

/// Serves the dashboard page.
pub async fn index() -> Response {
    match Assets::get("index.html") {
        Some(page) => (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            page.data.into_owned(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "dashboard not built in").into_response(),
    }
}
