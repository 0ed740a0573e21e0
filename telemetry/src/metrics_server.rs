//! A minimal HTTP endpoint for workers: `GET /metrics` (Prometheus text) and `GET /healthz`.
//! The manager serves the same routes from its API server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::otel::Telemetry;

/// Bind `addr` and serve until `cancel`. Returns the bound address (port 0 picks one).
pub async fn serve_metrics(
    addr: SocketAddr,
    telemetry: Arc<Telemetry>,
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
            let telemetry = telemetry.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(10), respond(stream, &telemetry))
                    .await;
            });
        }
    });
    Ok(bound)
}

async fn respond(mut stream: tokio::net::TcpStream, telemetry: &Telemetry) -> std::io::Result<()> {
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
        "/healthz" => ("200 OK", "text/plain", "ok".to_string()),
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
