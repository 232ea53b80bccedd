//! The API client the CLI's verbs use.

use anyhow::{Context, Result, anyhow};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Talks to one chime API.
pub struct ApiClient {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl ApiClient {
    /// A client of the API at `base` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base: &str, token: Option<String>) -> Result<Self> {
        // One TLS provider for the whole process: ring (no C toolchain, nothing downloaded).
        let _ = rustls::crypto::ring::default_provider().install_default();
        // Loading the system's root certificates is most of a CLI call's CPU: skip it for a
        // plain-HTTP API (the loopback default).
        let mut builder =
            reqwest::Client::builder().user_agent(concat!("chime/", env!("CARGO_PKG_VERSION")));
        if !base.starts_with("https://") {
            builder = builder.tls_certs_only(Vec::new());
        }
        let http = builder.build().context("building the HTTP client")?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            token,
        })
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let builder = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    /// GET `path` as JSON.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.send(self.request(Method::GET, path))
            .await
            .map(|(_, body)| body)
    }

    /// Whether GET `path` finds something: true on 2xx, false on 404; any other answer, or no
    /// answer, is an error.
    pub async fn exists(&self, path: &str) -> Result<bool> {
        let response = self.reach(self.request(Method::GET, path)).await?;
        match response.status() {
            status if status.is_success() => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => Err(refusal(response).await),
        }
    }

    /// GET `path` with `query` parameters (encoded), as JSON.
    pub async fn get_with<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T> {
        self.send(self.request(Method::GET, path).query(query))
            .await
            .map(|(_, body)| body)
    }

    /// GET `path` as a response to read as it arrives (a stream of server-sent events, say);
    /// an error status is an error with the API's message.
    pub async fn get_streaming(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<reqwest::Response> {
        let response = self
            .reach(self.request(Method::GET, path).query(query))
            .await?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(refusal(response).await)
    }

    /// POST `body` to `path`; returns the status and the JSON answer.
    pub async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<(StatusCode, T)> {
        self.send(self.request(Method::POST, path).json(body)).await
    }

    /// PUT `body` to `path`; returns the JSON answer.
    pub async fn put<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> Result<T> {
        self.send(self.request(Method::PUT, path).json(body))
            .await
            .map(|(_, body)| body)
    }

    /// PATCH `path` with `body` (a JSON merge patch); returns the JSON answer.
    pub async fn patch<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T> {
        self.send(self.request(Method::PATCH, path).json(body))
            .await
            .map(|(_, body)| body)
    }

    /// DELETE `path`.
    pub async fn delete(&self, path: &str) -> Result<()> {
        let response = self.reach(self.request(Method::DELETE, path)).await?;
        if response.status().is_success() {
            return Ok(());
        }
        Err(refusal(response).await)
    }

    /// Sends `request`; an error only when the API cannot be reached.
    async fn reach(&self, request: RequestBuilder) -> Result<reqwest::Response> {
        request.send().await.with_context(|| {
            format!(
                "cannot reach the chime API at {} (is `chime up` running? set CHIME_API_URL)",
                self.base
            )
        })
    }

    async fn send<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<(StatusCode, T)> {
        let response = self.reach(request).await?;
        let status = response.status();
        if !status.is_success() {
            return Err(refusal(response).await);
        }
        let bytes = response.bytes().await.context("reading the API's answer")?;
        let body =
            serde_json::from_slice(&bytes).context("the API's answer is not the JSON expected")?;
        Ok((status, body))
    }
}

/// An answer that is not a success, as an error: the API's message and the status.
async fn refusal(response: reqwest::Response) -> anyhow::Error {
    let status = response.status();
    match response.bytes().await {
        Ok(bytes) => anyhow!("{} (HTTP {})", error_message(&bytes), status.as_u16()),
        Err(error) => anyhow!(error).context("reading the API's answer"),
    }
}

/// The API's `{"error": "…"}`, or the body as text.
fn error_message(bytes: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(bytes).into_owned())
}
