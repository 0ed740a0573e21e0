//! Who may talk to the API: the bearer token on the `/v1` routes (required when the API is
//! not on loopback), and the `Host` check on every route but the probes. Without a token a
//! loopback API would answer any page a browser loads: a name the attacker controls that
//! resolves to 127.0.0.1 (DNS rebinding) makes the browser send `Host: evil.example`, and a
//! cross-site form sends its own `Origin`. So a request is answered only when its `Host` is
//! `localhost`, `127.0.0.1` or `[::1]` (any port) or a name in `[http] allowed_hosts`, and
//! its `Origin`, when a browser sends one, is the API's own (the console's pages). With a token the check applies
//! only when `allowed_hosts` is set. A refusal is a security event (log target
//! `loopgate::security`, `security_event = "http_request_refused"`, `reason`
//! `host_not_allowed` or `origin_not_allowed`, counted in
//! `loopgate_security_refused_messages_total{kind="http_request"}`).

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use opentelemetry::KeyValue;

use crate::admission::SECURITY_TARGET;
use crate::http::error::ApiError;
use crate::http::state::Shared;

/// The host names a loopback API always answers.
const LOOPBACK_HOSTS: &[&str] = &["localhost", "127.0.0.1", "[::1]"];
/// Routes answered whatever the `Host`: probes (kubelets send the pod IP) that reveal nothing.
const ANY_HOST_PATHS: &[&str] = &["/healthz", "/readyz"];
/// Characters of a refused header value kept in the log.
const LOGGED_CHARS: usize = 100;

/// The host part of a `Host` value (`name[:port]`, `[v6][:port]`), lowercase, without a
/// trailing dot; `None` when it is not one.
fn host_part(value: &str) -> Option<String> {
    let value = value.trim();
    let host = if value.starts_with('[') {
        let end = value.find(']')?;
        let rest = &value[end + 1..];
        if !(rest.is_empty() || rest.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        &value[..=end]
    } else {
        match value.rsplit_once(':') {
            Some((host, port)) if is_port(port) => host,
            Some(_) => return None,
            None => value,
        }
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty() && !host.contains(['/', '@', ' '])).then_some(host)
}

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `host` (from [`host_part`]) is one the API answers.
fn allowed(host: &str, names: &[String]) -> bool {
    LOOPBACK_HOSTS.contains(&host) || names.iter().any(|n| n == host)
}

/// Why a request fails the host check, if it does.
fn refusal(headers: &HeaderMap, names: &[String]) -> Option<(&'static str, String)> {
    let text = |name| {
        headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let host = text(header::HOST).unwrap_or_default();
    if !host_part(&host).is_some_and(|h| allowed(&h, names)) {
        return Some(("host_not_allowed", host));
    }
    // A browser names the page that sent a cross-origin or non-GET request: only the API's
    // own pages (the console) may; another local port (an app under test) may not either.
    if let Some(origin) = text(header::ORIGIN) {
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .filter(|rest| !rest.contains('/'));
        let same = authority.is_some_and(|a| {
            a.trim_end_matches('.')
                .eq_ignore_ascii_case(host.trim().trim_end_matches('.'))
        });
        if !same {
            return Some(("origin_not_allowed", origin));
        }
    }
    None
}

pub(crate) async fn require_allowed_host(
    State(s): State<Shared>,
    request: Request,
    next: Next,
) -> Response {
    let Some(names) = &s.allowed_hosts else {
        return next.run(request).await;
    };
    if ANY_HOST_PATHS.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let Some((reason, value)) = refusal(request.headers(), names) else {
        return next.run(request).await;
    };
    let shown: String = value.chars().take(LOGGED_CHARS).collect();
    tracing::warn!(
        target: SECURITY_TARGET,
        security_event = "http_request_refused",
        reason,
        value = %shown.escape_debug(),
        method = %request.method(),
        path = %request.uri().path(),
        "refused an HTTP request for another host (DNS rebinding or a cross-site page)"
    );
    s.engine.metrics().refused_messages.add(
        1,
        &[
            KeyValue::new("kind", "http_request"),
            KeyValue::new("reason", reason),
        ],
    );
    let message = if reason == "host_not_allowed" {
        "this API answers only requests for Host localhost, 127.0.0.1 or [::1] (any port) and the \
         names in [http] allowed_hosts"
    } else {
        "this API answers browser requests only from its own pages (Origin must match Host)"
    };
    ApiError::new(StatusCode::FORBIDDEN, reason, message).into_response()
}

/// Constant-time comparison, so the token cannot be guessed byte by byte from timings.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(crate) async fn require_token(
    State(s): State<Shared>,
    request: Request,
    next: Next,
) -> Response {
    let Some(expected) = &s.token else {
        return next.run(request).await;
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(token) if same(token.trim().as_bytes(), expected.as_bytes()) => {
            next.run(request).await
        }
        Some(_) => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the bearer token is wrong",
        )
        .into_response(),
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this API requires `Authorization: Bearer <token>` (loopgate --token / LOOPGATE_TOKEN)",
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn host_table() {
        let names = vec!["loopgate.internal".to_string()];
        // (Host, Origin, refused for)
        let cases: &[(&str, Option<&str>, Option<&str>)] = &[
            ("127.0.0.1:7600", None, None),
            ("localhost", None, None),
            ("LOCALHOST.:7600", None, None),
            ("[::1]:7600", None, None),
            ("loopgate.internal:443", None, None),
            ("127.0.0.1:7600", Some("http://127.0.0.1:7600"), None),
            ("Localhost:7600", Some("http://localhost:7600"), None),
            (
                "127.0.0.1:7600",
                Some("http://localhost:7600"),
                Some("origin_not_allowed"),
            ),
            (
                "127.0.0.1:7600",
                Some("http://127.0.0.1:3000"),
                Some("origin_not_allowed"),
            ),
            ("evil.example", None, Some("host_not_allowed")),
            ("evil.example:7600", None, Some("host_not_allowed")),
            (
                "localhost.evil.example:7600",
                None,
                Some("host_not_allowed"),
            ),
            ("127.0.0.2:7600", None, Some("host_not_allowed")),
            ("[::1]x", None, Some("host_not_allowed")),
            ("127.0.0.1:7600:1", None, Some("host_not_allowed")),
            ("user@127.0.0.1", None, Some("host_not_allowed")),
            ("", None, Some("host_not_allowed")),
            (
                "127.0.0.1:7600",
                Some("http://evil.example"),
                Some("origin_not_allowed"),
            ),
            ("127.0.0.1:7600", Some("null"), Some("origin_not_allowed")),
            (
                "127.0.0.1:7600",
                Some("file://"),
                Some("origin_not_allowed"),
            ),
            (
                "127.0.0.1:7600",
                Some("http://127.0.0.1/x"),
                Some("origin_not_allowed"),
            ),
        ];
        for (host, origin, want) in cases {
            let mut headers = HeaderMap::new();
            if !host.is_empty() {
                headers.insert(
                    header::HOST,
                    HeaderValue::from_str(host).unwrap_or(HeaderValue::from_static("x")),
                );
            }
            if let Some(origin) = origin {
                headers.insert(header::ORIGIN, HeaderValue::from_static(origin));
            }
            let got = refusal(&headers, &names).map(|(reason, _)| reason);
            assert_eq!(got, *want, "Host {host:?} Origin {origin:?}");
        }
    }
}
