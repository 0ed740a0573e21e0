//! Whether JetStream acknowledges this process's publishes: every JetStream publish of the
//! [`crate::Bus`] reports its outcome here, per subject. A subject whose publishes have gone
//! unacknowledged (no PubAck in time, or an error reply) since a publish that started at
//! least `stall_after` ago makes [`PublishWatch::verdict`] say why; the subject's next
//! acknowledged publish clears it. A subject nobody has tried for `forget_after` is dropped.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Subjects remembered at most (the least recently tried one goes first).
const MAX_SUBJECTS: usize = 64;

/// What one JetStream publish came to, as far as the watch cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome<'a> {
    /// The stream acknowledged it (a duplicate too).
    Acked,
    /// No PubAck within the request timeout.
    NoAck,
    /// JetStream answered with an error; the server's text.
    Rejected(&'a str),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    NoAck,
    Rejected(String),
}

#[derive(Debug, Clone)]
struct Unacked {
    /// When the first publish that failed (since the last acknowledged one) started.
    since: Instant,
    last_try: Instant,
    failures: u32,
    last: Failure,
}

/// Per subject, the publishes that failed since the last acknowledged one.
#[derive(Debug)]
pub(crate) struct PublishWatch {
    stall_after: Duration,
    forget_after: Duration,
    subjects: HashMap<String, Unacked>,
}

impl PublishWatch {
    /// With the bus's request timeout (how long one publish waits for its PubAck): a subject
    /// stalls after two timeouts' worth of failing publishes, and is forgotten after thirty
    /// with no publish tried.
    pub(crate) fn new(request_timeout: Duration) -> Self {
        PublishWatch {
            stall_after: request_timeout.saturating_mul(2),
            forget_after: request_timeout.saturating_mul(30),
            subjects: HashMap::new(),
        }
    }

    /// A publish to `subject` that started at `started` ended with `outcome` at `now`.
    pub(crate) fn record(
        &mut self,
        subject: &str,
        started: Instant,
        outcome: Outcome<'_>,
        now: Instant,
    ) {
        let failure = match outcome {
            Outcome::Acked => {
                self.subjects.remove(subject);
                return;
            }
            Outcome::NoAck => Failure::NoAck,
            Outcome::Rejected(text) => Failure::Rejected(text.to_string()),
        };
        let entry = self
            .subjects
            .entry(subject.to_string())
            .or_insert_with(|| Unacked {
                since: started,
                last_try: now,
                failures: 0,
                last: Failure::NoAck,
            });
        entry.since = entry.since.min(started);
        entry.last_try = now;
        entry.failures = entry.failures.saturating_add(1);
        entry.last = failure;
        if self.subjects.len() > MAX_SUBJECTS {
            let stalest = self
                .subjects
                .iter()
                .min_by_key(|(_, u)| u.last_try)
                .map(|(s, _)| s.clone());
            if let Some(stalest) = stalest {
                self.subjects.remove(&stalest);
            }
        }
    }

    /// The subjects tried within `forget_after`, the longest unacknowledged first.
    fn live(&self, now: Instant) -> Vec<(&String, &Unacked)> {
        let mut live: Vec<_> = self
            .subjects
            .iter()
            .filter(|(_, u)| now.saturating_duration_since(u.last_try) < self.forget_after)
            .collect();
        live.sort_by(|a, b| a.1.since.cmp(&b.1.since).then_with(|| a.0.cmp(b.0)));
        live
    }

    /// How long the longest unacknowledged subject has gone without a PubAck (zero if none).
    pub(crate) fn unacked_for(&self, now: Instant) -> Duration {
        self.live(now)
            .first()
            .map(|(_, u)| now.saturating_duration_since(u.since))
            .unwrap_or_default()
    }

    /// `Err(why)` while a subject has gone unacknowledged for `stall_after` or longer.
    pub(crate) fn verdict(&self, now: Instant) -> Result<(), String> {
        let live = self.live(now);
        let Some((subject, oldest)) = live.first() else {
            return Ok(());
        };
        let secs = now.saturating_duration_since(oldest.since).as_secs();
        if now.saturating_duration_since(oldest.since) < self.stall_after {
            return Ok(());
        }
        let others = match live.len() - 1 {
            0 => String::new(),
            1 => ", and 1 other subject".to_string(),
            n => format!(", and {n} other subjects"),
        };
        let tries = match oldest.failures {
            1 => "1 publish".to_string(),
            n => format!("{n} publishes"),
        };
        Err(match &oldest.last {
            Failure::NoAck => format!(
                "no acknowledgement for {secs} s ({tries} timed out, subject {subject}{others}): \
                 the NATS server may be out of disk for its JetStream store (its log says \
                 \"no space left on device\") or overloaded; nats-server 2.15 needs a restart \
                 after its store filled"
            ),
            Failure::Rejected(text) => format!(
                "refused for {secs} s ({tries}, subject {subject}{others}): JetStream \
                 answered: {text}"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);

    /// One publish: (subject, started at s, ended at s, outcome).
    type Try = (&'static str, u64, u64, Outcome<'static>);

    fn watch_after(tries: &[Try]) -> (PublishWatch, Instant) {
        let zero = Instant::now();
        let mut watch = PublishWatch::new(T);
        for (subject, started, ended, outcome) in tries {
            watch.record(
                subject,
                zero + Duration::from_secs(*started),
                *outcome,
                zero + Duration::from_secs(*ended),
            );
        }
        (watch, zero)
    }

    #[test]
    fn a_subject_stalls_after_two_timeouts_worth_and_clears_on_its_next_ack() {
        use Outcome::*;
        // (publishes, looked at s, stalled for s or None)
        let cases: &[(&[Try], u64, Option<u64>)] = &[
            (&[], 100, None),
            (&[("a", 0, 1, Acked)], 100, None),
            // One timeout: not yet.
            (&[("a", 0, 10, NoAck)], 10, None),
            // No ack for 20 s, whether retried or not.
            (&[("a", 0, 10, NoAck)], 20, Some(20)),
            (&[("a", 0, 10, NoAck), ("a", 13, 23, NoAck)], 23, Some(23)),
            // The relay's retry is acknowledged: clear.
            (&[("a", 0, 10, NoAck), ("a", 13, 14, Acked)], 30, None),
            (
                &[
                    ("a", 0, 10, NoAck),
                    ("a", 13, 23, NoAck),
                    ("a", 26, 27, Acked),
                ],
                27,
                None,
            ),
            // Another subject's ack does not clear a stalled one.
            (&[("a", 0, 10, NoAck), ("b", 12, 13, Acked)], 25, Some(25)),
            // An error reply counts as no acknowledgement.
            (
                &[("a", 0, 0, Rejected("insufficient resources"))],
                20,
                Some(20),
            ),
            // Not tried for 30 timeouts' worth: forgotten.
            (&[("a", 0, 10, NoAck)], 309, Some(309)),
            (&[("a", 0, 10, NoAck)], 310, None),
        ];
        for (tries, at, want) in cases {
            let (watch, zero) = watch_after(tries);
            let now = zero + Duration::from_secs(*at);
            let got = watch.verdict(now);
            assert_eq!(got.is_err(), want.is_some(), "{tries:?} at {at}: {got:?}");
            if let Some(secs) = want {
                assert_eq!(watch.unacked_for(now), Duration::from_secs(*secs));
                let why = got.err().unwrap_or_default();
                assert!(why.contains(&format!("for {secs} s")), "{why}");
            }
        }
    }

    #[test]
    fn the_reason_names_the_longest_stalled_subject_and_what_went_wrong() {
        use Outcome::*;
        let cases: &[(&[Try], u64, &str)] = &[
            (
                &[
                    ("lg.exec.cli", 0, 10, NoAck),
                    ("lg.exec.cli", 13, 23, NoAck),
                ],
                25,
                "no acknowledgement for 25 s (2 publishes timed out, subject lg.exec.cli): \
                 the NATS server may be out of disk for its JetStream store (its log says \
                 \"no space left on device\") or overloaded; nats-server 2.15 needs a restart \
                 after its store filled",
            ),
            (
                &[
                    ("b", 5, 15, NoAck),
                    ("a", 0, 10, NoAck),
                    ("c", 6, 16, NoAck),
                ],
                20,
                "no acknowledgement for 20 s (1 publish timed out, subject a, and 2 other \
                 subjects)",
            ),
            (
                &[
                    ("a", 0, 10, NoAck),
                    (
                        "a",
                        11,
                        11,
                        Rejected("insufficient storage resources (10047)"),
                    ),
                ],
                21,
                "refused for 21 s (2 publishes, subject a): JetStream answered: insufficient \
                 storage resources (10047)",
            ),
        ];
        for (tries, at, want) in cases {
            let (watch, zero) = watch_after(tries);
            let why = watch
                .verdict(zero + Duration::from_secs(*at))
                .err()
                .unwrap_or_default();
            assert!(why.starts_with(want), "{tries:?}:\n{why}\n{want}");
        }
    }

    #[test]
    fn it_remembers_a_bounded_number_of_subjects() {
        let zero = Instant::now();
        let mut watch = PublishWatch::new(T);
        for i in 0..(MAX_SUBJECTS as u64 + 10) {
            let at = zero + Duration::from_secs(i);
            watch.record(&format!("s{i}"), at, Outcome::NoAck, at);
        }
        assert_eq!(watch.subjects.len(), MAX_SUBJECTS);
        assert!(!watch.subjects.contains_key("s0"));
        assert!(watch
            .subjects
            .contains_key(&format!("s{}", MAX_SUBJECTS + 9)));
    }
}
