//! A running executor episode's progress notice: the latest one per episode (step attempt)
//! of the round in flight is kept in the record (`episode_progress`), and it is logged when
//! its turn or tool changed from the one kept (so the run log grows by about one entry per
//! model turn, whatever the worker's rate).

use loopgate_protocol::wire::{EpisodeProgress, FIRST_ATTEMPT};

use super::tx::Tx;
use super::Decision;
use crate::state::{LogEvent, Phase, RunRecord};

/// Keep `progress` as the latest of its episode; log it when its turn or tool is new.
pub(super) fn on_episode_progress(
    record: &RunRecord,
    progress: &EpisodeProgress,
    now: i64,
) -> Decision {
    if progress.generation != record.generation {
        return Decision::Ignore(format!("stale generation {}", progress.generation));
    }
    let executing =
        matches!(&record.phase, Phase::Executing { round, .. } if *round == progress.round);
    if !executing {
        return Decision::Ignore(format!(
            "no executor episode of round {} is running",
            progress.round
        ));
    }
    let same_episode =
        |p: &EpisodeProgress| p.round == progress.round && p.attempt == progress.attempt;
    let previous = record.episode_progress.iter().find(|p| same_episode(p));
    if previous.is_some_and(|p| p.elapsed_ms > progress.elapsed_ms && p.worker == progress.worker) {
        return Decision::Ignore("an older progress notice than the one kept".into());
    }
    let news = previous.is_none_or(|p| p.turn != progress.turn || p.tool != progress.tool);
    let mut tx = Tx::new(record, now);
    tx.record
        .episode_progress
        .retain(|p| p.round == progress.round && !same_episode(p));
    tx.record.episode_progress.push(progress.clone());
    if news {
        tx.log(LogEvent::EpisodeProgress {
            worker: progress.worker.clone(),
            turn: progress.turn,
            tool: progress.tool.clone(),
            tool_calls: progress.tool_calls,
            tokens: progress.tokens,
            elapsed_ms: progress.elapsed_ms,
            step_attempt: (progress.attempt > FIRST_ATTEMPT).then_some(progress.attempt),
        });
    }
    tx.finish()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::decide::tests::{reply, started};
    use crate::decide::{decide, RunEvent};

    fn notice(round: u32, turn: u32, tool: Option<&str>, elapsed_ms: u64) -> EpisodeProgress {
        EpisodeProgress {
            run_id: "r1".into(),
            generation: 1,
            round,
            delivery_attempt: 1,
            worker: "w".into(),
            attempt: 1,
            turn,
            tool: tool.map(str::to_string),
            tool_calls: 0,
            tokens: 10,
            elapsed_ms,
        }
    }

    fn executing() -> RunRecord {
        reply(&started(), "Next: cli\nTask: write hello.py").record
    }

    fn apply(r: &RunRecord, p: EpisodeProgress) -> Option<(RunRecord, usize)> {
        match decide(r, &RunEvent::EpisodeProgress(p), 1_000) {
            Decision::Apply(step) => Some((step.record, step.log.len())),
            _ => None,
        }
    }

    /// The latest notice is kept; a new turn or tool is logged, the same one is not; another
    /// round's, an older one, or one while nothing executes is ignored.
    #[test]
    fn latest_kept_and_news_logged() {
        let r = executing();
        let (r1, logged) = apply(&r, notice(1, 1, None, 100)).unwrap();
        assert_eq!((r1.episode_progress.len(), logged), (1, 1));
        let (r2, logged) = apply(&r1, notice(1, 1, None, 1_200)).unwrap();
        assert_eq!((r2.episode_progress[0].elapsed_ms, logged), (1_200, 0));
        let (r3, logged) = apply(&r2, notice(1, 1, Some("shell"), 1_500)).unwrap();
        assert_eq!((r3.episode_progress.len(), logged), (1, 1));
        assert!(apply(&r3, notice(1, 2, None, 900)).is_none(), "older");
        assert!(
            apply(&r3, notice(2, 1, None, 2_000)).is_none(),
            "other round"
        );
        assert!(
            apply(&started(), notice(1, 1, None, 100)).is_none(),
            "not executing"
        );
        // The last applied event stays what it was: a redelivery of it is still a replay.
        assert_eq!(r3.last_event, r.last_event);
    }

    /// A progress notice that exhausted its deliveries fails nothing.
    #[test]
    fn a_lost_notice_is_no_dead_letter_event() {
        let lost = loopgate_protocol::wire::Message::EpisodeProgress(notice(1, 1, None, 1));
        assert!(RunEvent::dead_lettered(&lost, "max deliveries").is_none());
    }
}
