//! Start-up with patience: `loopgate up` and Kubernetes start every process at once, so a
//! daemon keeps trying what it needs (NATS, a bucket the manager creates, Redis) for a while
//! instead of failing because it came up first. Errors that retrying cannot fix (bad
//! credentials, bad options) fail at once.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::bus::{Bus, BusOptions};
use crate::bus_error::BusError;

/// How long start-up keeps retrying by default.
pub const CONNECT_PATIENCE: Duration = Duration::from_secs(30);
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Calls `attempt` until it succeeds, fails with an error `retryable` refuses, `patience` is
/// spent (the last error is returned) or `cancel` fires (`Ok(None)`).
pub async fn retry_with_patience<T, E, F, Fut>(
    what: &str,
    patience: Duration,
    cancel: &CancellationToken,
    retryable: impl Fn(&E) -> bool,
    mut attempt: F,
) -> Result<Option<T>, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let started = Instant::now();
    let mut backoff = FIRST_BACKOFF;
    loop {
        let result = tokio::select! {
            biased;
            () = cancel.cancelled() => return Ok(None),
            result = attempt() => result,
        };
        match result {
            Ok(value) => return Ok(Some(value)),
            Err(err) if retryable(&err) && started.elapsed() + backoff < patience => {
                tracing::warn!(what, error = %err, ?backoff, "not reachable yet; retrying");
            }
            Err(err) => return Err(err),
        }
        tokio::select! {
            () = cancel.cancelled() => return Ok(None),
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Connect to NATS, retrying unreachable-server errors for up to `patience`; `Ok(None)` when
/// `cancel` fires first.
pub async fn connect_bus(
    url: &str,
    prefix: &str,
    options: &BusOptions,
    patience: Duration,
    cancel: &CancellationToken,
) -> Result<Option<Bus>, BusError> {
    retry_with_patience("NATS", patience, cancel, BusError::is_retryable, || {
        Bus::connect(url, prefix, options.clone())
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[derive(Debug)]
    struct Failure {
        retryable: bool,
    }

    impl std::fmt::Display for Failure {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "failure (retryable: {})", self.retryable)
        }
    }

    async fn run(
        fail_times: u32,
        retryable: bool,
        patience: Duration,
    ) -> (Result<Option<u32>, Failure>, u32) {
        let calls = AtomicU32::new(0);
        let result = retry_with_patience(
            "thing",
            patience,
            &CancellationToken::new(),
            |e: &Failure| e.retryable,
            || {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                async move {
                    if n < fail_times {
                        Err(Failure { retryable })
                    } else {
                        Ok(n)
                    }
                }
            },
        )
        .await;
        (result, calls.load(Ordering::SeqCst))
    }

    #[tokio::test(start_paused = true)]
    async fn retries_what_can_be_retried_within_patience() {
        let secs = Duration::from_secs;
        // (failures before success, retryable, patience, succeeds, calls made)
        let cases = [
            (0, true, secs(30), true, 1),
            (3, true, secs(30), true, 4),
            (3, false, secs(30), false, 1),
            // Tries at 0, 0.25, 0.75, 1.75, 3.75, 5.75, 7.75 and 9.75 s, then patience is spent.
            (1000, true, secs(10), false, 8),
        ];
        for (fail_times, retryable, patience, succeeds, calls) in cases {
            let (result, made) = run(fail_times, retryable, patience).await;
            assert_eq!(result.is_ok(), succeeds, "{fail_times} {retryable}");
            assert_eq!(made, calls, "{fail_times} {retryable}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_ends_the_wait_without_an_error() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let result: Result<Option<()>, Failure> = retry_with_patience(
            "thing",
            Duration::from_secs(30),
            &cancel,
            |_| true,
            || async { Err(Failure { retryable: true }) },
        )
        .await;
        assert!(matches!(result, Ok(None)));
    }
}
