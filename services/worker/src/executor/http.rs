//! The `http` kind: one request; the status decides the outcome.
//!
//! An expected status (any 2xx by default) succeeds; 429 and 503 reject the attempt (the server
//! asked us to come back later; its Retry-After, in seconds or as an HTTP date, sets the earliest
//! next attempt); any other status, and a request that cannot be made, fails it. The response
//! body's tail is the task's output.
//!
//! Where the request may go is [`HttpPolicy`]'s to say: the URL's address before the request,
//! every resolved address as it is connected to, and each redirect's target. Redirects are
//! followed here, not by the client, and only when the task asks (`follow_redirects`): a 301, 302
//! or 303 turns the request into a GET without a body, a 307 or 308 keeps it but is not followed
//! to another origin with a body, and the task's headers (credentials, often) go to the first
//! URL's origin only.

use std::time::Duration;

use chime_core::model::{HttpSpec, TaskResult};
use chime_core::store::task_lifecycle::AttemptEnd;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, LOCATION, RETRY_AFTER};
use reqwest::{Method, StatusCode, Url};

use super::Attempt;
use super::http_policy::HttpPolicy;

/// The most redirects one attempt follows.
const MAX_REDIRECTS: usize = 10;

/// Makes the request, cut short by the attempt's timeout, a kill or shutdown.
pub async fn run(
    client: &reqwest::Client,
    policy: &HttpPolicy,
    spec: HttpSpec,
    attempt: &Attempt,
) -> AttemptEnd {
    let tail = &attempt.output;
    let exchange = async {
        let mut response = send(client, policy, &spec, &attempt.message.data).await?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(parse_retry_after);
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| chime_core::redact::error_with_causes(&e.without_url()))?
        {
            tail.push(&chunk);
        }
        Ok::<_, String>((status, retry_after))
    };
    let outcome = tokio::select! {
        outcome = exchange => outcome,
        why = attempt.interruption() => {
            return attempt.interrupted(why, TaskResult { output: tail.text(), ..TaskResult::default() });
        }
    };
    let output = tail.text();
    match outcome {
        Err(error) => AttemptEnd::Failed {
            result: TaskResult {
                output,
                error: Some(error),
                ..TaskResult::default()
            },
            reason: "error",
        },
        Ok((status, _)) if spec.is_expected(status.as_u16()) => AttemptEnd::Succeeded(TaskResult {
            // A body that is JSON (and whole: the output keeps only its tail) is the result.
            value: serde_json::from_str(output.trim()).ok(),
            output,
            ..TaskResult::default()
        }),
        Ok((
            status @ (StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE),
            retry_after,
        )) => AttemptEnd::Rejected {
            result: TaskResult {
                output,
                error: Some(format!(
                    "{} {} answered {status}: try later",
                    spec.method,
                    chime_core::redact::http_url(&spec.url)
                )),
                ..TaskResult::default()
            },
            retry_after,
        },
        Ok((status, _)) => AttemptEnd::Failed {
            result: TaskResult {
                output,
                error: Some(format!(
                    "{} {} answered {status}, expected {}",
                    spec.method,
                    chime_core::redact::http_url(&spec.url),
                    expected(&spec)
                )),
                ..TaskResult::default()
            },
            reason: "failed",
        },
    }
}

/// One request of an attempt: the first, or a redirect's.
struct Hop {
    url: Url,
    method: Method,
    /// Whether the task's body goes with it.
    body: bool,
    /// Whether the task's headers go with it (the first URL's origin only).
    headers: bool,
}

/// Sends the request, following redirects when the task asks; returns the last response.
async fn send(
    client: &reqwest::Client,
    policy: &HttpPolicy,
    spec: &HttpSpec,
    data: &serde_json::Value,
) -> Result<reqwest::Response, String> {
    let shown = chime_core::redact::http_url(&spec.url);
    let url = Url::parse(&spec.url).map_err(|e| format!("invalid URL {shown}: {e}"))?;
    policy.check_url(&url)?;
    let method = Method::from_bytes(spec.method.as_bytes())
        .map_err(|_| format!("invalid method {:?}", spec.method))?;
    let origin = url.origin();
    let mut hop = Hop {
        url,
        method,
        body: true,
        headers: true,
    };
    for _ in 0..=MAX_REDIRECTS {
        let request = build(client, &hop, spec, data)?;
        let response = request
            .send()
            .await
            .map_err(|e| chime_core::redact::error_with_causes(&e.without_url()))?;
        let status = response.status();
        if !spec.follow_redirects || !status.is_redirection() {
            return Ok(response);
        }
        let Some(location) = response
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
        else {
            return Ok(response);
        };
        let next = hop
            .url
            .join(location)
            .map_err(|e| format!("{status} to an invalid location: {e}"))?;
        let to = chime_core::redact::http_url(next.as_str());
        policy
            .check_url(&next)
            .map_err(|why| format!("{status} redirect to {to}: {why}"))?;
        let same_origin = next.origin() == origin;
        let has_body = spec.send_data || !matches!(spec.body, None | Some(serde_json::Value::Null));
        match status {
            StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT => {
                if hop.body && has_body && !same_origin {
                    return Err(format!(
                        "refused: {status} redirect to another origin ({to}) would send the \
                         request's body there"
                    ));
                }
            }
            _ => {
                if hop.method != Method::HEAD {
                    hop.method = Method::GET;
                }
                hop.body = false;
            }
        }
        hop.headers = same_origin;
        hop.url = next;
    }
    Err(format!("more than {MAX_REDIRECTS} redirects from {shown}"))
}

fn build(
    client: &reqwest::Client,
    hop: &Hop,
    spec: &HttpSpec,
    data: &serde_json::Value,
) -> Result<reqwest::RequestBuilder, String> {
    let mut headers = HeaderMap::new();
    for (name, value) in spec.headers.iter().filter(|_| hop.headers) {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("invalid header name {name:?}"))?;
        let value =
            HeaderValue::from_str(value).map_err(|_| format!("invalid value for header {name}"))?;
        headers.insert(name, value);
    }
    let request = client
        .request(hop.method.clone(), hop.url.clone())
        .headers(headers);
    if !hop.body {
        return Ok(request);
    }
    if spec.send_data {
        return Ok(request.json(data));
    }
    Ok(match &spec.body {
        None | Some(serde_json::Value::Null) => request,
        Some(serde_json::Value::String(text)) => request.body(text.clone()),
        Some(json) => request.json(json),
    })
}

fn expected(spec: &HttpSpec) -> String {
    if spec.expected_status.is_empty() {
        "2xx".into()
    } else {
        spec.expected_status
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(" or ")
    }
}

/// Retry-After: delta-seconds, or an HTTP date (RFC 9110 §10.2.3).
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    let wait = at.duration_since(jiff::Timestamp::now());
    Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        assert_eq!(parse_retry_after("120"), Some(Duration::from_secs(120)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }
}
