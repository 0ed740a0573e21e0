//! One shutdown token per daemon, cancelled by the first SIGTERM or SIGINT. Every loop selects
//! on it (or a child of it).

use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

/// A token cancelled on the first SIGTERM or SIGINT. Must be called inside the runtime. A
/// signal that cannot be listened for is logged; the other one still works.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    let mut term = signal(SignalKind::terminate())
        .map_err(|err| tracing::warn!(error = %err, "cannot listen for SIGTERM"))
        .ok();
    let mut int = signal(SignalKind::interrupt())
        .map_err(|err| tracing::warn!(error = %err, "cannot listen for SIGINT"))
        .ok();
    tokio::spawn(async move {
        let term_received = async {
            match term.as_mut() {
                Some(term) => term.recv().await,
                None => std::future::pending().await,
            }
        };
        let int_received = async {
            match int.as_mut() {
                Some(int) => int.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = term_received => tracing::info!("SIGTERM received: shutting down"),
            _ = int_received => tracing::info!("SIGINT received: shutting down"),
        }
        cancel.cancel();
    });
    token
}
