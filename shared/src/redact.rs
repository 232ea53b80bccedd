//! What may be shown of a value that can carry a secret: an http(s) URL keeps its scheme, host,
//! port and path, and loses its password and the values of its query (where receivers put their
//! tokens), for the audit trail, `webhook list`'s errors, log lines and an http task's stored
//! spec as readers see it; an HTTP client's error, with its causes and without its URL.

/// `url` with its password and its query's values replaced by `redacted` (the query's names
/// are kept: they say which parameter held what) and its fragment dropped. A URL that does not
/// parse is shown as `(a URL that does not parse)`: its text could be anything.
pub fn http_url(text: &str) -> String {
    let Ok(mut url) = url::Url::parse(text) else {
        return "(a URL that does not parse)".into();
    };
    if url.password().is_some() {
        let _ = url.set_password(Some("redacted"));
    }
    if url.query().is_some() {
        let names: Vec<String> = url
            .query_pairs()
            .map(|(name, _)| name.into_owned())
            .collect();
        let mut pairs = url.query_pairs_mut();
        pairs.clear();
        for name in &names {
            pairs.append_pair(name, "redacted");
        }
        drop(pairs);
    }
    url.set_fragment(None);
    url.to_string()
}

/// `error` and each of its causes, joined by `: `, as HTTP clients keep them (the reason a
/// connection failed is a cause of the request's error, not in its own message). Give it the
/// error without its URL (reqwest's `without_url`): the URL may hold a secret, and the caller
/// shows a redacted one beside it.
pub fn error_with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_query_values_are_hidden() {
        assert_eq!(
            http_url("https://bot:s3cret@hooks.example.com/T1/B2?token=abc&channel=ops#x"),
            "https://bot:redacted@hooks.example.com/T1/B2?token=redacted&channel=redacted"
        );
        assert_eq!(
            http_url("http://127.0.0.1:9000/hook"),
            "http://127.0.0.1:9000/hook"
        );
        assert_eq!(http_url("not a url"), "(a URL that does not parse)");
        assert!(!http_url("https://u:p@h/?k=secret").contains("secret"));
    }
}
