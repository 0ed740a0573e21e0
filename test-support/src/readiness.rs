//! Free ports and polling with a deadline (never fixed sleeps).

use std::future::Future;
use std::net::{Ipv4Addr, TcpListener};
use std::time::Duration;

use tokio::time::Instant;

use crate::errors::SupportError;

/// Returned by [`wait_until`] when the condition never held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("condition not met within {timeout:?}")]
pub struct WaitTimedOut {
    pub timeout: Duration,
}

/// A loopback TCP port that was free a moment ago (bind to port 0, read it, release it).
/// Servers started on it may still lose a race with another process; the server helpers in
/// this crate retry on a fresh port when that happens.
pub fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| SupportError::io("binding 127.0.0.1:0", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| SupportError::io("reading bound address", e))?
        .port();
    Ok(port)
}

/// Polls `check` until it returns true or `timeout` passes. The poll interval starts at 10 ms
/// and backs off to 250 ms. `check` is always called at least once, and once more at the deadline.
pub async fn wait_until<F, Fut>(timeout: Duration, mut check: F) -> Result<(), WaitTimedOut>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let mut poller = Poller::new(timeout);
    loop {
        if check().await {
            return Ok(());
        }
        if !poller.pause().await {
            return Err(WaitTimedOut { timeout });
        }
    }
}

/// Deadline plus backoff (10 ms doubling to 250 ms) shared by every polling loop here.
pub(crate) struct Poller {
    deadline: Instant,
    interval: Duration,
}

impl Poller {
    pub(crate) fn new(timeout: Duration) -> Self {
        Poller {
            deadline: Instant::now() + timeout,
            interval: Duration::from_millis(10),
        }
    }

    /// Sleeps until the next poll; false once the deadline has passed (poll one last time
    /// only if this returned true).
    pub(crate) async fn pause(&mut self) -> bool {
        let now = Instant::now();
        if now >= self.deadline {
            return false;
        }
        tokio::time::sleep(self.interval.min(self.deadline - now)).await;
        self.interval = (self.interval * 2).min(Duration::from_millis(250));
        true
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn wait_until_returns_once_condition_holds() {
        let calls = AtomicU32::new(0);
        let result = wait_until(Duration::from_secs(5), || async {
            calls.fetch_add(1, Ordering::SeqCst) >= 3
        })
        .await;
        assert_eq!(result, Ok(()));
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn wait_until_times_out_with_kind() {
        let timeout = Duration::from_millis(50);
        let result = wait_until(timeout, || async { false }).await;
        assert_eq!(result, Err(WaitTimedOut { timeout }));
    }

    #[test]
    fn free_port_is_bindable() {
        let port = free_port().unwrap();
        assert_ne!(port, 0);
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
    }
}
