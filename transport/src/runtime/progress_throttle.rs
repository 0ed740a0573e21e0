//! At most one progress notice per interval, counted from the episode's start: the start
//! notice already says the episode began, so the first progress notice waits one interval after
//! it, and an episode that ends sooner sends none (its result says the rest). A later one waits
//! until the interval since the last has passed (and then the latest state goes). [`Throttle`]
//! is the pure rule; [`send_throttled`] drives it from a watch channel for both workers'
//! episodes.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// The least time between two progress notices of an episode.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Call `send` with each new state from `rx`, at most once per `every` and not before `every`
/// has passed since this started (the latest state wins), with the time since this started and
/// a sequence number from 1, until every sender is gone (or the task is aborted).
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
    /// The last notice, the start notice (time zero) before any progress.
    last_sent: Duration,
}

impl Throttle {
    pub(crate) fn new(gap: Duration) -> Self {
        Throttle {
            gap,
            last_sent: Duration::ZERO,
        }
    }

    /// How long to wait, at `now` (time since the episode started), before the next notice
    /// may go.
    pub(crate) fn wait(&self, now: Duration) -> Duration {
        (self.last_sent + self.gap).saturating_sub(now)
    }

    /// A notice went at `now`.
    pub(crate) fn sent(&mut self, now: Duration) {
        self.last_sent = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_per_interval_counted_from_the_start() {
        let ms = Duration::from_millis;
        let mut t = Throttle::new(ms(1000));
        // (now, wait) before any progress: the start notice counts as the last.
        let first = [
            (ms(0), ms(1000)),
            (ms(1), ms(999)),
            (ms(400), ms(600)),
            (ms(1000), ms(0)),
            (ms(5000), ms(0)),
        ];
        for (now, want) in first {
            assert_eq!(t.wait(now), want, "before any progress, at {now:?}");
        }
        t.sent(ms(1700));
        let later = [(ms(1700), ms(1000)), (ms(2000), ms(700)), (ms(2700), ms(0))];
        for (now, want) in later {
            assert_eq!(t.wait(now), want, "after one at 1.7 s, at {now:?}");
        }
    }

    /// The notices an episode sends that changes its state 3 times, 100 ms apart, and then
    /// runs on for `then` (ended: the task aborted, as the workers do).
    async fn notices_of_an_episode(then: Duration) -> Vec<(u32, u64)> {
        let (tx, rx) = watch::channel(0u32);
        let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = sent.clone();
        let task = tokio::spawn(send_throttled(
            rx,
            Duration::from_secs(1),
            move |state, _elapsed, seq| {
                let record = record.clone();
                async move {
                    record
                        .lock()
                        .map(|mut v| v.push((state, seq)))
                        .unwrap_or(())
                }
            },
        ));
        for state in 1..=3 {
            tx.send(state).ok();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(then).await;
        task.abort();
        let _ = task.await;
        let notices = sent.lock().map(|v| v.clone()).unwrap_or_default();
        notices
    }

    /// An episode that ends within the first interval sends no progress notice at all; a
    /// longer one sends its latest state once the interval has passed.
    #[tokio::test(start_paused = true)]
    async fn an_episode_shorter_than_the_interval_sends_none() {
        assert_eq!(notices_of_an_episode(Duration::ZERO).await, vec![]);
        assert_eq!(
            notices_of_an_episode(Duration::from_secs(1)).await,
            vec![(3, 1)]
        );
    }
}
