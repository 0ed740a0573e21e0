//! At most one progress notice per interval: the first goes at once, a later one waits until
//! the interval since the last has passed (and then the latest state goes). Pure.

use std::time::Duration;

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
