//! The `http` kind: one request; the status decides the outcome.
//!
//! An expected status (any 2xx by default) succeeds; 429 and 503 reject the attempt (the server
//! asked us to come back later; its Retry-After, in seconds or as an HTTP date, sets the earliest
//! next attempt); any other status, and a request that cannot be made, fails it. The response
//! body's tail is the task's output.

use std::time::Duration;

use chime_core::model::{HttpSpec, TaskResult};
use chime_core::store::task_lifecycle::AttemptEnd;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use reqwest::{Method, StatusCode};

use super::Attempt;

/// Makes the request, cut short by the attempt's timeout, a kill or shutdown.
pub async fn run(client: &reqwest::Client, spec: HttpSpec, attempt: &Attempt) -> AttemptEnd {
    let tail = &attempt.output;
    let exchange = async {
        let request = build(client, &spec, &attempt.message.data)?;
        let mut response = request.send().await.map_err(|e| describe(&e))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(parse_retry_after);
        while let Some(chunk) = response.chunk().await.map_err(|e| describe(&e))? {
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
                    spec.method, spec.url
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
                    spec.url,
                    expected(&spec)
                )),
                ..TaskResult::default()
            },
            reason: "failed",
        },
    }
}

fn build(
    client: &reqwest::Client,
    spec: &HttpSpec,
    data: &serde_json::Value,
) -> Result<reqwest::RequestBuilder, String> {
    let method = Method::from_bytes(spec.method.as_bytes())
        .map_err(|_| format!("invalid method {:?}", spec.method))?;
    let mut headers = HeaderMap::new();
    for (name, value) in &spec.headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("invalid header name {name:?}"))?;
        let value =
            HeaderValue::from_str(value).map_err(|_| format!("invalid value for header {name}"))?;
        headers.insert(name, value);
    }
    let request = client.request(method, &spec.url).headers(headers);
    if spec.send_data {
        return Ok(request.json(data));
    }
    Ok(match &spec.body {
        None | Some(serde_json::Value::Null) => request,
        Some(serde_json::Value::String(text)) => request.body(text.clone()),
        Some(json) => request.json(json),
    })
}

/// `error: …` with the causes, which reqwest keeps in the source chain.
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
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
