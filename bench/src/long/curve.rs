//! The curve of a run: the hidden criteria passing after every round, for the snapshot the run
//! kept and for the executor's candidate, and what it says (the best snapshot held, whether the
//! run ended there, the rounds that lost ground). Pure.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One executor dispatch as the manager lists it (`GET /v1/runs/{id}/rounds`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagerRound {
    pub round: u32,
    /// The snapshot the round started from.
    pub base: String,
    /// The executor's frozen result, when it produced one.
    pub candidate: Option<String>,
}

/// The rounds of a `GET /v1/runs/{id}/rounds` answer, oldest first (entries without a base
/// snapshot are skipped).
pub fn manager_rounds_from_json(v: &Value) -> Vec<ManagerRound> {
    v["rounds"]
        .as_array()
        .map(|rounds| {
            rounds
                .iter()
                .filter_map(|r| {
                    Some(ManagerRound {
                        round: u32::try_from(r["round"].as_u64()?).ok()?,
                        base: r["base_snapshot"].as_str()?.to_string(),
                        candidate: r["candidate"].as_str().map(str::to_string),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What a run held after one round: `round` 0 is the start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundSnapshots {
    pub round: u32,
    /// The executor's candidate of this round (none at the start, or when the episode froze
    /// nothing).
    pub candidate: Option<String>,
    /// The snapshot the run held after the round: the next round's base, and for the last
    /// round the run's final snapshot (a candidate set aside leaves the previous one).
    pub kept: String,
}

/// A loop run's rounds: the start, then each dispatch with the snapshot kept after it.
pub fn loop_rounds(rounds: &[ManagerRound], final_snapshot: &str) -> Vec<RoundSnapshots> {
    let start = rounds
        .first()
        .map_or(final_snapshot, |r| r.base.as_str())
        .to_string();
    let mut out = vec![RoundSnapshots {
        round: 0,
        candidate: None,
        kept: start,
    }];
    for (i, r) in rounds.iter().enumerate() {
        let kept = rounds
            .get(i + 1)
            .map_or(final_snapshot, |next| next.base.as_str());
        out.push(RoundSnapshots {
            round: r.round,
            candidate: r.candidate.clone(),
            kept: kept.to_string(),
        });
    }
    out
}

/// Successive one-episode runs (`single_shot`, `continuation`): each starts from the last
/// snapshot, so what is held after an episode is its candidate (or, when it froze nothing, what
/// was held before). `candidates[i]` is episode i+1's.
pub fn episode_rounds(start: &str, candidates: &[Option<String>]) -> Vec<RoundSnapshots> {
    let mut out = vec![RoundSnapshots {
        round: 0,
        candidate: None,
        kept: start.to_string(),
    }];
    let mut kept = start.to_string();
    for (i, candidate) in candidates.iter().enumerate() {
        if let Some(c) = candidate {
            kept = c.clone();
        }
        out.push(RoundSnapshots {
            round: u32::try_from(i + 1).unwrap_or(u32::MAX),
            candidate: candidate.clone(),
            kept: kept.clone(),
        });
    }
    out
}

/// Every snapshot the rounds name, each once, in order of appearance.
pub fn distinct_snapshots(rounds: &[RoundSnapshots]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rounds {
        for s in r.candidate.iter().chain(std::iter::once(&r.kept)) {
            if !out.contains(s) {
                out.push(s.clone());
            }
        }
    }
    out
}

/// One point of the curve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurvePoint {
    pub round: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<String>,
    /// Hidden criteria the candidate passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_passed: Option<u32>,
    pub kept: String,
    /// Hidden criteria the kept snapshot passes.
    pub kept_passed: u32,
}

/// The curve, with `passed_of(snapshot)` the hidden criteria a snapshot passes.
pub fn curve(rounds: &[RoundSnapshots], passed_of: impl Fn(&str) -> u32) -> Vec<CurvePoint> {
    rounds
        .iter()
        .map(|r| CurvePoint {
            round: r.round,
            candidate: r.candidate.clone(),
            candidate_passed: r.candidate.as_deref().map(&passed_of),
            kept: r.kept.clone(),
            kept_passed: passed_of(&r.kept),
        })
        .collect()
}

/// What a curve says about its run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurveSummary {
    /// Hidden criteria of the final snapshot (the last point's kept one).
    pub final_passed: u32,
    /// The most hidden criteria any snapshot the run held passed.
    pub best_held: u32,
    /// The first round after which the run held that best snapshot (0: the start).
    pub best_held_round: u32,
    /// The run ended at a snapshot as good as the best it held.
    pub final_is_best: bool,
    /// The most hidden criteria any candidate passed (held or set aside).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_candidate: Option<u32>,
    /// Rounds after which the run held fewer hidden criteria than before them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_ground: Vec<u32>,
}

pub fn summarize(curve: &[CurvePoint]) -> CurveSummary {
    let Some(last) = curve.last() else {
        return CurveSummary {
            final_is_best: true,
            ..CurveSummary::default()
        };
    };
    let mut best = &curve[0];
    for p in curve {
        if p.kept_passed > best.kept_passed {
            best = p;
        }
    }
    let lost_ground = curve
        .windows(2)
        .filter(|w| w[1].kept_passed < w[0].kept_passed)
        .map(|w| w[1].round)
        .collect();
    CurveSummary {
        final_passed: last.kept_passed,
        best_held: best.kept_passed,
        best_held_round: best.round,
        final_is_best: last.kept_passed >= best.kept_passed,
        best_candidate: curve.iter().filter_map(|p| p.candidate_passed).max(),
        lost_ground,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn mr(round: u32, base: &str, candidate: Option<&str>) -> ManagerRound {
        ManagerRound {
            round,
            base: base.into(),
            candidate: candidate.map(str::to_string),
        }
    }

    fn rs(round: u32, candidate: Option<&str>, kept: &str) -> RoundSnapshots {
        RoundSnapshots {
            round,
            candidate: candidate.map(str::to_string),
            kept: kept.into(),
        }
    }

    #[test]
    fn the_manager_rounds_are_read_from_the_api_answer() {
        let v = json!({"rounds": [
            {"generation": 1, "round": 1, "objective": "a", "base_snapshot": "s0", "candidate": "c1"},
            {"generation": 1, "round": 2, "objective": "b", "base_snapshot": "c1", "candidate": null},
            {"round": 3},
        ]});
        assert_eq!(
            manager_rounds_from_json(&v),
            [mr(1, "s0", Some("c1")), mr(2, "c1", None)]
        );
        assert!(manager_rounds_from_json(&Value::Null).is_empty());
    }

    #[test]
    fn a_loop_keeps_the_next_base_and_ends_at_its_final_snapshot() {
        // Round 2's candidate c2 was set aside (round 3 starts from c1 again); round 3's
        // candidate c3 is the final snapshot.
        let rounds = [
            mr(1, "s0", Some("c1")),
            mr(2, "c1", Some("c2")),
            mr(3, "c1", Some("c3")),
        ];
        assert_eq!(
            loop_rounds(&rounds, "c3"),
            [
                rs(0, None, "s0"),
                rs(1, Some("c1"), "c1"),
                rs(2, Some("c2"), "c1"),
                rs(3, Some("c3"), "c3"),
            ]
        );
        // A run that never dispatched holds its start only.
        assert_eq!(loop_rounds(&[], "s0"), [rs(0, None, "s0")]);
    }

    #[test]
    fn episodes_keep_their_last_candidate() {
        let got = episode_rounds("s0", &[Some("c1".into()), None, Some("c3".into())]);
        assert_eq!(
            got,
            [
                rs(0, None, "s0"),
                rs(1, Some("c1"), "c1"),
                rs(2, None, "c1"),
                rs(3, Some("c3"), "c3"),
            ]
        );
        assert_eq!(distinct_snapshots(&got), ["s0", "c1", "c3"]);
    }

    #[test]
    fn the_summary_finds_the_best_held_and_the_rounds_that_lost_ground() {
        let passed = |s: &str| -> u32 {
            match s {
                "s0" => 0,
                "c1" => 3,
                "c2" => 5,
                "c3" => 2,
                _ => 1,
            }
        };
        let want =
            |final_passed, best_held, best_held_round, best_candidate, lost: &[u32]| CurveSummary {
                final_passed,
                best_held,
                best_held_round,
                final_is_best: final_passed >= best_held,
                best_candidate,
                lost_ground: lost.to_vec(),
            };
        let cases: Vec<(Vec<RoundSnapshots>, CurveSummary)> = vec![
            (
                vec![
                    rs(0, None, "s0"),
                    rs(1, Some("c1"), "c1"),
                    rs(2, Some("c2"), "c2"),
                ],
                want(5, 5, 2, Some(5), &[]),
            ),
            // Held c2 (5) after round 1, lost ground in round 2 and ended at c1 (3): below the
            // best it held.
            (
                vec![
                    rs(0, None, "s0"),
                    rs(1, Some("c2"), "c2"),
                    rs(2, Some("c3"), "c3"),
                    rs(3, Some("c1"), "c1"),
                ],
                want(3, 5, 1, Some(5), &[2]),
            ),
            // A better candidate set aside does not count as held.
            (
                vec![
                    rs(0, None, "s0"),
                    rs(1, Some("c1"), "c1"),
                    rs(2, Some("c2"), "c1"),
                ],
                want(3, 3, 1, Some(5), &[]),
            ),
            (vec![rs(0, None, "s0")], want(0, 0, 0, None, &[])),
        ];
        for (rounds, expected) in cases {
            assert_eq!(summarize(&curve(&rounds, passed)), expected, "{rounds:?}");
        }
        assert!(!want(3, 5, 1, None, &[]).final_is_best);
        assert!(summarize(&[]).final_is_best);
    }
}
