//! At most one progress notice per interval: the first goes at once, a later one waits until
//! the interval since the last has passed (and then the latest state goes). [`Throttle`] is the
//! pure rule; [`send_throttled`] drives it from a watch channel for both workers' episodes.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// The least time between two progress notices of an episode.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Call `send` with each new state from `rx`, at most once per `every` (the latest state wins),
/// with the time since this started and a sequence number from 1, until every sender is gone
/// (or the task is aborted).
pub async fn send_throttled<T, F, Fut>(mut rx: watch::Receiver<T>, every: Duration, mut send: F)
where
    T: Clone,
    F: FnMut(T, Duration, u64) -> Fut,
    Fut: Future<Output = ()>,
{
    let started = Instant::now();
    let mut throttle = Throttle::new(every);
    let mut seq: u64 = 0;
    while rx.changed().await.is_ok() {
        let wait = throttle.wait(started.elapsed());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let now = rx.borrow_and_update().clone();
        let elapsed = started.elapsed();
        throttle.sent(elapsed);
        seq += 1;
        send(now, elapsed, seq).await;
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Throttle {
    gap: Duration,
    last_sent: Option<Duration>,
}

impl Throttle {
    pub(crate) fn new(gap: Duration) -> Self {
        Throttle {
            gap,
            last_sent: None,
        }
    }

    /// How long to wait, at `now` (time since any fixed start), before the next notice may go.
    pub(crate) fn wait(&self, now: Duration) -> Duration {
        match self.last_sent {
            None => Duration::ZERO,
            Some(last) => (last + self.gap).saturating_sub(now),
        }
    }

    /// A notice went at `now`.
    pub(crate) fn sent(&mut self, now: Duration) {
        self.last_sent = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_per_interval() {
        let ms = Duration::from_millis;
        let mut t = Throttle::new(ms(1000));
        assert_eq!(t.wait(ms(0)), ms(0));
        t.sent(ms(0));
        // (now, wait)
        let cases = [
            (ms(1), ms(999)),
            (ms(400), ms(600)),
            (ms(1000), ms(0)),
            (ms(5000), ms(0)),
        ];
        for (now, want) in cases {
            assert_eq!(t.wait(now), want, "{now:?}");
        }
        t.sent(ms(1700));
        assert_eq!(t.wait(ms(2000)), ms(700));
    }
}
