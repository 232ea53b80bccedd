//! Who may call what: authentication, the role each route needs, the loopback guard of an install
//! without tokens, and the audit trail of changes.
//!
//! Authentication is on when `CHIME_API_TOKEN` is set, when any token exists in the store, or
//! when the API listens beyond loopback (unless started with `--insecure-no-auth`). Then every
//! route needs `Authorization: Bearer <token>` except `/healthz`, `/readyz`, the dashboard's
//! static page (it holds no data; it asks for a token) and, when `metrics_public` is set,
//! `/metrics`.
//!
//! With authentication off (a loopback install without tokens), the caller is `local`, an admin,
//! but only a request that names a loopback `Host` is served (DNS rebinding), and a state change
//! must come from the same origin (`Origin`, `Sec-Fetch-Site`), so a web page the operator visits
//! cannot drive the API.
//!
//! Whether any token exists is read at most once a second ([`TokenCheck`]), not on every
//! request: a token created or revoked through this API instance counts at once; one created
//! through another instance, within a second (as a worker's AMQP door, within five).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chime_core::model::{ANY_USER, Identity, Role};
use chime_core::store::{audit, tokens};

use crate::error::ApiError;
use crate::state::AppState;

/// How long "does any live token exist?" is believed.
const TOKEN_CHECK_TTL: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether any live token exists, as last read from the store (at most [`TOKEN_CHECK_TTL`] ago).
#[derive(Debug, Default)]
pub struct TokenCheck(std::sync::Mutex<LastAnswer>);

/// The last answer, and how many times it was forgotten (a read that began before a `forget`
/// must not be kept after it).
#[derive(Debug, Default)]
struct LastAnswer {
    answer: Option<(std::time::Instant, bool)>,
    forgotten: u64,
}

impl TokenCheck {
    /// Whether any live token exists: the last answer if it is fresh, else the store's.
    pub async fn any_live(
        &self,
        store: &chime_core::store::Store,
    ) -> Result<bool, chime_core::store::StoreError> {
        let forgotten = {
            let last = self.last();
            match last.answer {
                Some((at, any)) if at.elapsed() < TOKEN_CHECK_TTL => return Ok(any),
                _ => last.forgotten,
            }
        };
        let asked = std::time::Instant::now();
        let any = tokens::any_live(store).await?;
        let mut last = self.last();
        if last.forgotten == forgotten {
            last.answer = Some((asked, any));
        }
        Ok(any)
    }

    /// Drops the last answer: this instance created or revoked a token.
    pub fn forget(&self) {
        let mut last = self.last();
        last.answer = None;
        last.forgotten += 1;
    }

    /// The last answer; a panic elsewhere while it was held leaves a cache, still usable.
    fn last(&self) -> std::sync::MutexGuard<'_, LastAnswer> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The caller of a request, put in its extensions by [`authorize`].
#[derive(Debug, Clone)]
pub struct Caller(pub Identity, bool);

impl Caller {
    /// Whether authentication was off: the caller is the anonymous local admin.
    pub fn is_local(&self) -> bool {
        self.1
    }
}

/// The name of the caller when authentication is off.
pub const LOCAL: &str = "local";
fn full_identity(name: &str) -> Identity {
    Identity {
        name: name.to_string(),
        role: Role::Admin,
        execute_users: vec![ANY_USER.to_string()],
    }
}

/// The role a call needs. Reads need `read`; submitting, killing, re-running, running,
/// backfilling, pausing, resuming and draining need `operate`; every other change, and the token
/// list and audit trail, need `admin`.
pub fn required_role(method: &Method, path: &str) -> Role {
    let segments: Vec<&str> = path
        .trim_start_matches("/api/v1/")
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let admin_reads = matches!(
        segments.first(),
        Some(&"tokens") | Some(&"audit") | Some(&"webhooks")
    );
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return if admin_reads { Role::Admin } else { Role::Read };
    }
    if *method != Method::POST {
        return Role::Admin;
    }
    let operate_action = |action: &str| {
        matches!(
            action,
            "run" | "backfill" | "pause" | "resume" | "kill" | "rerun" | "drain" | "cancel"
        )
    };
    match segments.as_slice() {
        ["schedule", "preview"] | ["definitions", "plan"] | ["tasks", "wait"] => Role::Read,
        ["tasks"] | ["tasks", "batch"] => Role::Operate,
        ["tasks", _, action]
        | ["workers", _, action]
        | ["trigger-groups", _, action]
        | ["backfills", _, action]
            if operate_action(action) =>
        {
            Role::Operate
        }
        ["jobs" | "triggers", _, _, action] if operate_action(action) => Role::Operate,
        ["jobs", _, _, "tasks", action] if operate_action(action) => Role::Operate,
        _ => Role::Admin,
    }
}

/// Whether a successful call is a change kept in the audit trail (submissions are recorded on
/// their task instead, and previews change nothing).
fn audited(method: &Method, path: &str) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
        && path.starts_with("/api/v1/")
        && path != "/api/v1/tasks"
        && path != "/api/v1/tasks/batch"
        && path != "/api/v1/schedule/preview"
        && path != "/api/v1/definitions/plan"
        && path != "/api/v1/tasks/wait"
}

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, message).into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, "Bearer".parse().expect("static"));
    response
}

/// Whether `host` (a `Host` header or an origin's authority, port included) names this machine.
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    let name = name.to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether a header (lower-case, as `http` keeps them) is one a proxy adds to a request it relays.
fn is_proxy_header(name: &str) -> bool {
    matches!(
        name,
        "forwarded" | "via" | "x-real-ip" | "client-ip" | "true-client-ip"
    ) || name.starts_with("x-forwarded-")
        || name.starts_with("x-original-")
}

/// The loopback guard of an install without tokens: a `Host` that names this machine, and state
/// changes from the same origin only.
fn loopback_guard(method: &Method, headers: &HeaderMap) -> Result<(), ApiError> {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    // A request relayed by a proxy on this machine names a loopback Host but comes from anyone.
    // Not every proxy says it is one (a default nginx `proxy_pass` adds no header at all), so
    // the book (docs/src/operations/security.md) says a tokenless API must not sit behind one;
    // those that do say so are refused.
    let forwarded = headers.keys().any(|name| is_proxy_header(name.as_str()));
    if forwarded {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "this API has no tokens, so it does not answer through a proxy: create a token \
             (chime token create) first",
        ));
    }
    if !is_loopback_host(host) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "this API has no tokens, so it answers only to loopback names (Host {host:?} is \
                 not one): create a token (chime token create) to reach it by another name"
            ),
        ));
    }
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    let cross_site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|site| !matches!(site, "same-origin" | "none"));
    let foreign_origin = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|origin| {
            let authority = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"));
            authority != Some(host)
        });
    if cross_site || foreign_origin {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "cross-origin requests may not change anything",
        ));
    }
    Ok(())
}

/// Authenticates the caller, checks the route's role, runs the call, and records a change in the
/// audit trail.
pub async fn authorize(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_string();
    let method = request.method().clone();
    let public = matches!(path.as_str(), "/healthz" | "/readyz")
        || crate::dashboard::is_page(&path)
        || (path == "/metrics" && state.metrics_public);
    if public {
        return next.run(request).await;
    }
    // A NUL can reach no table; refused here, it is a 400 rather than a database error.
    let raw = request.uri().to_string();
    if raw.contains("%00") {
        return ApiError::bad_request("the URL contains a NUL character (%00)").into_response();
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.strip_prefix("Bearer ").unwrap_or(v).trim().to_string());
    let local = presented.is_none();
    let identity = match presented {
        // The bootstrap secret too is looked up in the store, so revoking it takes effect at once.
        Some(secret) => match tokens::authenticate(&state.store, &secret).await {
            Ok(Some(identity)) => identity,
            Ok(None) => return unauthorized("invalid or revoked token"),
            Err(error) => return ApiError::from(error).into_response(),
        },
        None => {
            let auth_on = if state.auth_required {
                true
            } else {
                match state.token_check.any_live(&state.store).await {
                    Ok(any) => any,
                    Err(error) => return ApiError::from(error).into_response(),
                }
            };
            if auth_on {
                return unauthorized(
                    "this call needs Authorization: Bearer <token> (chime --token, or \
                     CHIME_API_TOKEN)",
                );
            }
            if state.loopback
                && let Err(refused) = loopback_guard(&method, request.headers())
            {
                return refused.into_response();
            }
            full_identity(LOCAL)
        }
    };

    let needed = required_role(&method, &path);
    if !identity.has(needed) {
        if audited(&method, &path) {
            let _ = audit::record(
                state.store.pool(),
                &identity.name,
                method.as_str(),
                &path,
                403,
                None,
            )
            .await;
        }
        return ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "token {:?} has the {} role; this call needs {needed}",
                identity.name, identity.role
            ),
        )
        .into_response();
    }
    let actor = identity.name.clone();
    request.extensions_mut().insert(Caller(identity, local));
    let response = next.run(request).await;
    // Recorded whatever the answer: a 5xx may follow a change that committed.
    if audited(&method, &path)
        && let Err(error) = audit::record(
            state.store.pool(),
            &actor,
            method.as_str(),
            &path,
            response.status().as_u16(),
            // What the handler said it changed (a creation names its object; an update, its
            // settings before and after).
            response.extensions().get::<audit::AuditDetail>(),
        )
        .await
    {
        tracing::warn!(%error, %actor, %method, %path, "cannot record the audit event");
    }
    response
}

/// 403 unless the caller may have tasks run as `execute_user`.
pub fn may_execute_as(caller: &Caller, execute_user: Option<&str>) -> Result<(), ApiError> {
    caller
        .0
        .check_execute_user(execute_user)
        .map_err(|why| ApiError::new(StatusCode::FORBIDDEN, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_needs_its_role() {
        let post = Method::POST;
        assert_eq!(required_role(&Method::GET, "/api/v1/tasks"), Role::Read);
        assert_eq!(required_role(&Method::GET, "/api/v1/tokens"), Role::Admin);
        assert_eq!(required_role(&post, "/api/v1/tasks"), Role::Operate);
        assert_eq!(required_role(&post, "/api/v1/tasks/batch"), Role::Operate);
        assert_eq!(required_role(&post, "/api/v1/tasks/wait"), Role::Read);
        assert_eq!(required_role(&post, "/api/v1/tasks/x/kill"), Role::Operate);
        assert_eq!(required_role(&post, "/api/v1/jobs/g/n/run"), Role::Operate);
        assert_eq!(
            required_role(&post, "/api/v1/jobs/g/n/tasks/rerun"),
            Role::Operate
        );
        assert_eq!(
            required_role(&Method::PATCH, "/api/v1/jobs/g/n"),
            Role::Admin
        );
        assert_eq!(
            required_role(&post, "/api/v1/jobs/g/n/dependencies"),
            Role::Admin
        );
        assert_eq!(required_role(&post, "/api/v1/jobs"), Role::Admin);
        assert_eq!(required_role(&Method::PUT, "/api/v1/jobs/g/n"), Role::Admin);
        assert_eq!(
            required_role(&Method::DELETE, "/api/v1/tasks/x"),
            Role::Admin
        );
        assert_eq!(
            required_role(&post, "/api/v1/trigger-groups/g/pause"),
            Role::Operate
        );
        assert_eq!(required_role(&post, "/api/v1/schedule/preview"), Role::Read);
        assert_eq!(required_role(&post, "/api/v1/definitions/plan"), Role::Read);
        assert_eq!(required_role(&post, "/api/v1/tokens"), Role::Admin);
    }

    #[test]
    fn proxy_headers() {
        for name in [
            "forwarded",
            "via",
            "x-real-ip",
            "x-forwarded-for",
            "x-forwarded-proto",
            "x-forwarded-port",
            "x-forwarded-prefix",
            "x-forwarded-host",
        ] {
            assert!(is_proxy_header(name), "{name}");
        }
        for name in ["host", "origin", "authorization", "x-request-id"] {
            assert!(!is_proxy_header(name), "{name}");
        }
    }

    #[test]
    fn loopback_names() {
        for host in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:80",
            "[::1]:8080",
            "a.localhost",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.example",
            "10.0.0.1:8080",
            "",
            "localhost.evil.example",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
