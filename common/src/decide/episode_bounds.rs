//! What one episode may claim, bounded by what its dispatch allowed. A worker's result is
//! unsigned where it reports usage (an executor's `exec_result` entirely, an audit report's
//! `usage` outside the signed claims), and whoever holds that role's NATS credentials may
//! publish one; the run's spend budget must not end on a number no episode could reach.
//!
//! An episode runs at most its `episode_secs` (the worker enforces it) plus the manager's
//! `episode_grace_secs`; no model spends more than [`TOKENS_PER_EPISODE_SEC`] tokens or
//! [`COST_MICROS_PER_EPISODE_SEC`] micro-dollars a second (cache reads of parallel agents
//! included, with a wide margin), so usage above `(episode_secs + grace) x rate` is a lie, refused
//! as a security event and never charged. What stays possible is a claim up to the ceiling:
//! a leaked executor credential can still charge one episode's worth per round it answers.

use super::transition::Distrust;
use crate::budget::Budget;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::wire::EpisodeRole;

/// Tokens one episode can spend per second of its time limit, at most.
pub const TOKENS_PER_EPISODE_SEC: u64 = 100_000;
/// Micro-dollars one episode can spend per second of its time limit, at most ($2/s).
pub const COST_MICROS_PER_EPISODE_SEC: u64 = 2_000_000;

/// The most an episode of `role` may report under `budget`: `(tokens, cost_micros)`.
pub(super) fn usage_ceiling(budget: &Budget, role: EpisodeRole) -> (u64, u64) {
    let secs = match role {
        EpisodeRole::Executor => budget.executor_episode_secs,
        EpisodeRole::Auditor => budget.auditor_episode_secs,
    }
    .saturating_add(budget.episode_grace_secs);
    (
        secs.saturating_mul(TOKENS_PER_EPISODE_SEC),
        secs.saturating_mul(COST_MICROS_PER_EPISODE_SEC),
    )
}

/// Refuse `usage`, reported by a `kind` message of round `round`, when no episode of `role`
/// could have spent it under `budget`.
pub(super) fn check_usage(
    budget: &Budget,
    role: EpisodeRole,
    kind: &'static str,
    round: u32,
    usage: Usage,
) -> Result<(), Distrust> {
    let (tokens, cost_micros) = usage_ceiling(budget, role);
    if usage.total() <= tokens && usage.cost_micros <= cost_micros {
        return Ok(());
    }
    Err(Distrust {
        kind,
        reason: "usage_over_ceiling",
        detail: format!(
            "the {kind} of round {round} reports {} tokens and {} micro-dollars; an episode \
             of this run may spend at most {tokens} tokens and {cost_micros} micro-dollars",
            usage.total(),
            usage.cost_micros
        ),
    })
}
