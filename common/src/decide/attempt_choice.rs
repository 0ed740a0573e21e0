//! Which sibling of a step of several attempts wins, by its checks-only audit: pure.

use crate::state::{Attempt, AttemptScore};

/// A scored sibling, as the choice reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contender {
    /// 1-based sibling index.
    pub attempt: u32,
    /// Blocking criteria its candidate passed.
    pub passing: u32,
    /// Its candidate broke integrity: it never wins.
    pub integrity_violation: bool,
    /// Tokens its episode used.
    pub tokens: u64,
    /// Paths its candidate changed (the diff's size).
    pub changed_paths: u32,
}

impl Contender {
    /// The contender a scored sibling is; `None` when it has no score.
    pub fn of(attempt: &Attempt) -> Option<Contender> {
        let AttemptScore {
            passing,
            integrity_violation,
            changed_paths,
            ..
        } = attempt.score?;
        Some(Contender {
            attempt: attempt.index,
            passing,
            integrity_violation,
            tokens: attempt.tokens,
            changed_paths,
        })
    }
}

/// The winner among `contenders`: the one passing the most blocking criteria; a tie goes to
/// fewer tokens, then the smaller diff, then the lower index. One with an integrity violation
/// never wins; `None` when no other is left.
pub fn choose_winner(contenders: &[Contender]) -> Option<u32> {
    contenders
        .iter()
        .filter(|c| !c.integrity_violation)
        .min_by_key(|c| {
            (
                std::cmp::Reverse(c.passing),
                c.tokens,
                c.changed_paths,
                c.attempt,
            )
        })
        .map(|c| c.attempt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(attempt: u32, passing: u32, violation: bool, tokens: u64, diff: u32) -> Contender {
        Contender {
            attempt,
            passing,
            integrity_violation: violation,
            tokens,
            changed_paths: diff,
        }
    }

    #[test]
    fn the_most_blocking_criteria_win_then_fewer_tokens_then_the_smaller_diff() {
        let cases: Vec<(&str, Vec<Contender>, Option<u32>)> = vec![
            ("none", vec![], None),
            ("one", vec![c(1, 0, false, 10, 1)], Some(1)),
            (
                "most passing",
                vec![
                    c(1, 5, false, 10, 1),
                    c(2, 7, false, 999, 9),
                    c(3, 6, false, 1, 1),
                ],
                Some(2),
            ),
            (
                "tie: fewer tokens",
                vec![c(1, 7, false, 500, 1), c(2, 7, false, 400, 9)],
                Some(2),
            ),
            (
                "tie on tokens: smaller diff",
                vec![c(1, 7, false, 400, 3), c(2, 7, false, 400, 2)],
                Some(2),
            ),
            (
                "full tie: the lower index",
                vec![c(2, 7, false, 400, 2), c(1, 7, false, 400, 2)],
                Some(1),
            ),
            (
                "an integrity violation never wins, whatever it passes",
                vec![c(1, 9, true, 1, 1), c(2, 3, false, 900, 9)],
                Some(2),
            ),
            (
                "only violations: no winner",
                vec![c(1, 9, true, 1, 1), c(2, 9, true, 1, 1)],
                None,
            ),
            (
                "nothing passing still wins over nothing",
                vec![c(1, 0, false, 50, 1), c(2, 0, false, 40, 1)],
                Some(2),
            ),
        ];
        for (name, contenders, want) in cases {
            assert_eq!(choose_winner(&contenders), want, "{name}");
        }
    }

    #[test]
    fn an_unscored_sibling_is_no_contender() {
        let mut a = Attempt::queued(2);
        assert_eq!(Contender::of(&a), None);
        a.tokens = 30;
        a.score = Some(AttemptScore {
            passing: 2,
            blocking: 3,
            integrity_violation: false,
            changed_paths: 4,
        });
        assert_eq!(Contender::of(&a), Some(c(2, 2, false, 30, 4)));
    }
}
