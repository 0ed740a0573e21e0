//! A minimal HTTP/1.0 GET over a TcpStream, for readiness probes (no HTTP client dependency).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::errors::SupportError;

/// Status code and body of a plain `GET`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    pub status: u16,
    pub body: String,
}

/// `GET http://host:port/path` with an overall `timeout`. Only plain http, no redirects,
/// no chunked decoding (HTTP/1.0 servers answer with a plain body).
pub async fn http_get(url: &str, timeout: Duration) -> anyhow::Result<HttpReply> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow::anyhow!("only http:// urls are supported: {url}"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let exchange = async {
        let mut stream = TcpStream::connect(authority)
            .await
            .map_err(|e| SupportError::io(format!("connecting to {authority}"), e))?;
        let request =
            format!("GET {path} HTTP/1.0\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| SupportError::io(format!("writing to {authority}"), e))?;
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .await
            .map_err(|e| SupportError::io(format!("reading from {authority}"), e))?;
        parse_reply(&raw)
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| anyhow::anyhow!("GET {url} timed out after {timeout:?}"))?
}

fn parse_reply(raw: &[u8]) -> anyhow::Result<HttpReply> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .lines()
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| anyhow::anyhow!("malformed HTTP status line in {head:?}"))?;
    Ok(HttpReply {
        status,
        body: body.to_string(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn parses_status_and_body() {
        let cases: &[(&[u8], u16, &str)] = &[
            (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", 200, "{}"),
            (b"HTTP/1.1 503 Service Unavailable\r\n\r\n", 503, ""),
            (b"HTTP/1.1 404 Not Found\r\nA: b\r\n\r\nnope", 404, "nope"),
        ];
        for (raw, status, body) in cases {
            let reply = parse_reply(raw).unwrap();
            assert_eq!(reply.status, *status);
            assert_eq!(reply.body, *body);
        }
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_reply(b"garbage").is_err());
    }
}
