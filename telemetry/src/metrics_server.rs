//! A minimal HTTP endpoint for workers: `GET /metrics` (Prometheus text), `GET /healthz`
//! (liveness) and `GET /readyz` (readiness), both from a [`Health`]: 200 `ok`, or 503 with the
//! reason. The manager serves the same routes from its API server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::health::Health;
use crate::otel::Telemetry;

/// Bind `addr` and serve until `cancel`. Returns the bound address (port 0 picks one).
pub async fn serve_metrics(
    addr: SocketAddr,
    telemetry: Arc<Telemetry>,
    health: Health,
    cancel: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = cancel.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _)) = accepted else { continue };
            let (telemetry, health) = (telemetry.clone(), health.clone());
            tokio::spawn(async move {
                let answer = respond(stream, &telemetry, &health);
                let _ = tokio::time::timeout(Duration::from_secs(10), answer).await;
            });
        }
    });
    Ok(bound)
}

fn probe(result: Result<(), String>) -> (&'static str, &'static str, String) {
    match result {
        Ok(()) => ("200 OK", "text/plain", "ok".to_string()),
        Err(why) => ("503 Service Unavailable", "text/plain", why),
    }
}

/// A readiness body with the process's notes, one a line after it.
fn with_notes(body: String, notes: &[String]) -> String {
    notes
        .iter()
        .fold(body, |body, note| format!("{body}\n{note}"))
}

async fn respond(
    mut stream: tokio::net::TcpStream,
    telemetry: &Telemetry,
    health: &Health,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 4096];
    let n = stream.read(&mut buf).await?;
    let request = String::from_utf8_lossy(&buf[..n]);
    let path = request.split_whitespace().nth(1).unwrap_or("/");
    let (status, content_type, body) = match path {
        "/metrics" => (
            "200 OK",
            "text/plain; version=0.0.4",
            telemetry.prometheus_text(),
        ),
        "/healthz" => probe(health.live()),
        "/readyz" => {
            let (status, content_type, body) = probe(health.ready());
            (status, content_type, with_notes(body, &health.notes()))
        }
        _ => ("404 Not Found", "text/plain", "not found".to_string()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_answer_200_or_503_with_the_reason() {
        for (result, status, body) in [
            (Ok(()), "200 OK", "ok"),
            (
                Err("nats connection: not ready".to_string()),
                "503 Service Unavailable",
                "nats connection: not ready",
            ),
        ] {
            let (got_status, _, got_body) = probe(result);
            assert_eq!((got_status, got_body.as_str()), (status, body));
        }
    }

    #[test]
    fn readiness_lists_the_notes_after_its_answer() {
        let notes = ["workspace overlays: off (x)".to_string()];
        for (body, notes, want) in [
            ("ok", &notes[..], "ok\nworkspace overlays: off (x)"),
            ("ok", &[][..], "ok"),
        ] {
            assert_eq!(with_notes(body.to_string(), notes), want);
        }
    }
}
