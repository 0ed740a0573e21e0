//! A periodic task (a deadline sweep, garbage collection, gauges): run one pass every `period`
//! until `cancel` fires. A failed pass is logged and the next one runs on schedule: periodic
//! work is idempotent by design, so a miss costs one period, never the loop.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// When the first pass runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstPass {
    /// At once, then every `period`.
    Now,
    /// After one `period`.
    AfterPeriod,
}

/// Run `pass` every `period` until `cancel` fires; `task` names it in the logs.
pub async fn run_periodically<F, Fut, T, E>(
    task: &'static str,
    period: Duration,
    first: FirstPass,
    cancel: CancellationToken,
    mut pass: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let mut wait = match first {
        FirstPass::Now => Duration::ZERO,
        FirstPass::AfterPeriod => period,
    };
    loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        let done = tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            done = pass() => done,
        };
        if let Err(err) = done {
            tracing::warn!(task, error = %err, "periodic pass failed; the next one runs on schedule");
        }
        wait = period;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn passes_run_on_schedule_through_failures_until_cancelled() {
        // (first pass, passes seen after 35 s with a 10 s period)
        let cases = [(FirstPass::Now, 4), (FirstPass::AfterPeriod, 3)];
        for (first, expected) in cases {
            let calls = Arc::new(AtomicU32::new(0));
            let cancel = CancellationToken::new();
            let counter = calls.clone();
            let task = tokio::spawn(run_periodically(
                "test",
                Duration::from_secs(10),
                first,
                cancel.clone(),
                move || {
                    let n = counter.fetch_add(1, Ordering::SeqCst);
                    // Every other pass fails; the schedule does not care.
                    async move {
                        if n.is_multiple_of(2) {
                            Ok(())
                        } else {
                            Err("flaky")
                        }
                    }
                },
            ));
            tokio::time::sleep(Duration::from_secs(35)).await;
            cancel.cancel();
            task.await.unwrap();
            assert_eq!(calls.load(Ordering::SeqCst), expected, "{first:?}");
        }
    }
}
