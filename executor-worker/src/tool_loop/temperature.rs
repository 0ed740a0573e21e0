//! The sampling temperature of each model turn. A profile that sets `temperature` gets it for
//! an episode's first try; each self-check refusal in the episode, and an episode that retries
//! a step whose last audit failed, raise it by [`RETRY_STEP`], up to [`MAX_RETRY_TEMPERATURE`].
//!
//! A low temperature makes a small model's first try its most likely answer, but when that
//! answer is wrong it reproduces it on every retry; so the first try keeps the profile's
//! temperature and each retry samples wider. A profile without `temperature` keeps the
//! server's default on every turn.
//!
//! Siblings of a step of several attempts (`budget.attempts`) are sampled apart: sibling `k`
//! counts `k - 1` retries more, and past the first asks for seed `k` where the model API
//! takes one (the first sibling is sampled as a step of one episode). Pure.

/// Added per refusal or failed audit.
pub(crate) const RETRY_STEP: f32 = 0.3;
/// The most a retry raises the temperature to (a higher base is kept as it is).
pub(crate) const MAX_RETRY_TEMPERATURE: f32 = 1.0;

/// The temperature to ask for after `retries` (refusals so far, plus one when the episode
/// retries a failed audit); `None`: the profile's (server's) default.
pub(crate) fn turn_temperature(base: Option<f32>, retries: u32) -> Option<f32> {
    let base = base?;
    if retries == 0 || base >= MAX_RETRY_TEMPERATURE {
        return Some(base);
    }
    let raised = base + RETRY_STEP * retries as f32;
    Some(raised.min(MAX_RETRY_TEMPERATURE))
}

/// The seed sibling `attempt` asks for: none for the first (the server's own, as a step of
/// one episode), `attempt` for every other.
pub(crate) fn sibling_seed(attempt: u32) -> Option<u64> {
    (attempt > loopgate_protocol::wire::FIRST_ATTEMPT).then_some(u64::from(attempt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siblings_past_the_first_get_their_own_seed() {
        let cases = [(0, None), (1, None), (2, Some(2)), (8, Some(8))];
        for (attempt, want) in cases {
            assert_eq!(sibling_seed(attempt), want, "{attempt}");
        }
    }

    #[test]
    fn temperature_table() {
        // (profile temperature, retries, asked)
        let cases = [
            (None, 0, None),
            (None, 3, None),
            (Some(0.2), 0, Some(0.2)),
            (Some(0.2), 1, Some(0.5)),
            (Some(0.2), 2, Some(0.8)),
            (Some(0.2), 3, Some(1.0)),
            (Some(0.2), 9, Some(1.0)),
            (Some(0.0), 1, Some(0.3)),
            (Some(1.3), 2, Some(1.3)),
        ];
        for (base, retries, want) in cases {
            let got = turn_temperature(base, retries);
            match (got, want) {
                (None, None) => {}
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-6, "{base:?} {retries}: {g}"),
                _ => panic!("{base:?} {retries}: got {got:?}, want {want:?}"),
            }
        }
    }
}
