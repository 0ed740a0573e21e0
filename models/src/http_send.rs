//! The HTTP side shared by the provider clients: one POST with a JSON body, non-success statuses
//! turned into classified errors (with `Retry-After`), and the body read whole or as SSE.

use std::time::Duration;

use loopgate_common::redact::redact_text;
use reqwest::header::{HeaderMap, HeaderValue, CONTENT_TYPE};

use crate::model_error::ModelError;
use crate::retry::retry_after_from_headers;
use crate::sse::{SseDecoder, SseEvent};

/// Connecting may take at most this long (or the whole timeout, if shorter).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client whose every request (connect, send, whole body read) is bounded by `timeout`.
pub(crate) fn http_client(timeout: Duration) -> Result<reqwest::Client, ModelError> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(CONNECT_TIMEOUT.min(timeout))
        .build()
        .map_err(|source| ModelError::Transport { source })
}

fn transport_error(source: reqwest::Error, timeout: Duration) -> ModelError {
    if source.is_timeout() {
        ModelError::Timeout { timeout }
    } else {
        ModelError::Transport { source }
    }
}

/// A success response, body not read yet.
pub(crate) struct Reply {
    response: reqwest::Response,
    timeout: Duration,
}

impl Reply {
    /// True when the server answered with an event stream.
    pub fn is_event_stream(&self) -> bool {
        self.response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
    }

    pub async fn text(self) -> Result<String, ModelError> {
        let timeout = self.timeout;
        self.response
            .text()
            .await
            .map_err(|e| transport_error(e, timeout))
    }

    /// Feeds each SSE event to `on_event` until the body ends or `on_event` returns `true`
    /// (the stream's own end marker). A read failure midway is `Interrupted`.
    pub async fn events(
        mut self,
        mut on_event: impl FnMut(&SseEvent) -> Result<bool, ModelError>,
    ) -> Result<(), ModelError> {
        let mut decoder = SseDecoder::new();
        loop {
            let chunk = match self.response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(e) if e.is_timeout() => {
                    return Err(ModelError::Timeout {
                        timeout: self.timeout,
                    })
                }
                Err(e) => return Err(ModelError::interrupted(format!("reading the stream: {e}"))),
            };
            for event in decoder.push(&chunk) {
                if on_event(&event)? {
                    return Ok(());
                }
            }
        }
        if let Some(event) = decoder.finish() {
            on_event(&event)?;
        }
        Ok(())
    }
}

/// POSTs `body` as JSON with `headers`; a non-success status becomes `ModelError::Status`
/// carrying the body excerpt and the server's `Retry-After`.
pub(crate) async fn post_json(
    http: &reqwest::Client,
    endpoint: &str,
    headers: HeaderMap,
    body: &str,
    timeout: Duration,
) -> Result<Reply, ModelError> {
    let secrets = sensitive_values(&headers);
    let response = http
        .post(endpoint)
        .headers(headers)
        .header(CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| transport_error(e, timeout))?;
    let status = response.status();
    if status.is_success() {
        return Ok(Reply { response, timeout });
    }
    let retry_after = retry_after_from_headers(response.headers());
    let text = response
        .text()
        .await
        .map_err(|e| transport_error(e, timeout))?;
    // Providers echo the key they refused ("Incorrect API key provided: sk-..."): the error
    // reaches logs, the run log and the API, so the key never rides along.
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
    Err(ModelError::status_after(
        status.as_u16(),
        &redact_text(&text, &secrets),
        retry_after,
    ))
}

/// The secret values among `headers` (those marked sensitive, without a `Bearer ` prefix).
fn sensitive_values(headers: &HeaderMap) -> Vec<String> {
    headers
        .values()
        .filter(|v| v.is_sensitive())
        .filter_map(|v| v.to_str().ok())
        .map(|v| v.strip_prefix("Bearer ").unwrap_or(v).to_string())
        .collect()
}

/// A header value holding a secret (marked sensitive so it is never logged).
pub(crate) fn secret_header(value: &str) -> Result<HeaderValue, ModelError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| {
        ModelError::InvalidRequest("the API key is not a valid header value".into())
    })?;
    value.set_sensitive(true);
    Ok(value)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn sensitive_header_values_are_the_secrets() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "authorization",
            secret_header("Bearer sk-abcdef123").unwrap(),
        );
        headers.insert("x-api-key", secret_header("anthropic-key-42").unwrap());
        headers.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        let mut secrets = sensitive_values(&headers);
        secrets.sort();
        assert_eq!(secrets, vec!["anthropic-key-42", "sk-abcdef123"]);
        let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
        assert_eq!(
            redact_text("Incorrect API key provided: sk-abcdef123.", &refs),
            "Incorrect API key provided: ***."
        );
    }
}
