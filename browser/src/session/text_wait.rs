//! Waiting for text (or a field or control) on a page: until it appears, the limit passes, or
//! (with a settle time) the page's text has stayed the same that long, so a page that has
//! stopped changing does not cost the whole limit. Pure: the caller reads the page and the
//! clock.

use std::time::Duration;

use tokio::time::Instant;

/// What a wait does after one look at the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextWaitStep {
    Found,
    /// Look again after the poll interval.
    Poll,
    /// The limit passed.
    TimedOut,
    /// The page's text has not changed for the settle time.
    Settled,
}

/// One wait for one text.
#[derive(Debug)]
pub(crate) struct TextWait {
    deadline: Instant,
    settle: Option<Duration>,
    /// The page's text at the last look, and when it last changed.
    last: Option<String>,
    changed_at: Instant,
}

impl TextWait {
    pub(crate) fn new(start: Instant, timeout: Duration, settle: Option<Duration>) -> Self {
        TextWait {
            deadline: start + timeout,
            settle: settle.filter(|s| !s.is_zero()),
            last: None,
            changed_at: start,
        }
    }

    /// The page's text `page` was read at `now`: is `wanted` there, and if not, wait on?
    pub(crate) fn observe(&mut self, page: &str, wanted: &str, now: Instant) -> TextWaitStep {
        self.observe_found(page, page.contains(wanted), now)
    }

    /// The page's text `page` was read at `now`, and what is waited for (a text, a field, a
    /// control) was `found` on it or not: wait on?
    pub(crate) fn observe_found(&mut self, page: &str, found: bool, now: Instant) -> TextWaitStep {
        if found {
            return TextWaitStep::Found;
        }
        if self.last.as_deref() != Some(page) {
            self.last = Some(page.to_string());
            self.changed_at = now;
        }
        if now >= self.deadline {
            return TextWaitStep::TimedOut;
        }
        match self.settle {
            Some(settle) if now.duration_since(self.changed_at) >= settle => TextWaitStep::Settled,
            _ => TextWaitStep::Poll,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_ends_on_the_text_the_limit_or_a_page_that_stopped_changing() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let secs = Duration::from_secs;
        // (settle, looks as (page text, at ms), the step after the last look)
        type Look = (&'static str, u64);
        let rows: [(Option<Duration>, &[Look], TextWaitStep); 8] = [
            (None, &[("Items: 1", 100)], TextWaitStep::Found),
            (
                None,
                &[("Items: 0", 100), ("Items: 0", 9_900)],
                TextWaitStep::Poll,
            ),
            (
                None,
                &[("Items: 0", 100), ("Items: 0", 10_000)],
                TextWaitStep::TimedOut,
            ),
            // The page has not changed for the settle time: it fails before the limit.
            (
                Some(secs(2)),
                &[("Items: 0", 100), ("Items: 0", 2_100)],
                TextWaitStep::Settled,
            ),
            (
                Some(secs(2)),
                &[("Items: 0", 100), ("Items: 0", 2_000)],
                TextWaitStep::Poll,
            ),
            // A change starts the settle time again.
            (
                Some(secs(2)),
                &[("Loading", 100), ("Loading.", 1_900), ("Loading.", 3_800)],
                TextWaitStep::Poll,
            ),
            (
                Some(secs(2)),
                &[("Loading", 100), ("Items: 1", 5_000)],
                TextWaitStep::Found,
            ),
            // Zero settles never: the whole limit.
            (
                Some(secs(0)),
                &[("Items: 0", 100), ("Items: 0", 9_000)],
                TextWaitStep::Poll,
            ),
        ];
        for (i, (settle, looks, want)) in rows.into_iter().enumerate() {
            let mut wait = TextWait::new(t0, secs(10), settle);
            let mut step = TextWaitStep::Poll;
            for (page, at) in looks {
                step = wait.observe(page, "Items: 1", ms(*at));
            }
            assert_eq!(step, want, "row {i}");
        }
    }
}
