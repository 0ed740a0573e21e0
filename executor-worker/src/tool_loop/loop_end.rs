//! What the tool loop is given (its limits) and what it gives back (why it stopped, what it
//! spent).

use std::time::Duration;

use loopgate_models::ModelError;
use loopgate_protocol::usage::Usage;

use crate::tool_loop::context_health::HealthPolicy;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoopLimits {
    /// Model calls at most (handoff turns included).
    pub max_steps: u32,
    /// Wall-clock bound on the whole loop.
    pub episode: Duration,
    /// Context-health scoring and resets.
    pub health: HealthPolicy,
    /// The episode retries a step whose last audit failed: its first turn already samples
    /// wider (see `temperature`).
    pub retrying: bool,
    /// Which sibling of its step the episode is (`ExecRequest::attempt`, 1-based): each one
    /// past the first samples wider and with its own seed (see `temperature`).
    pub attempt: u32,
    /// Tokens the loop may spend (`ExecRequest::max_tokens`): once its usage reaches them, no
    /// further model call is made. `None`: no limit.
    pub max_tokens: Option<u64>,
}

/// Why the loop stopped.
#[derive(Debug)]
pub enum LoopEnd {
    /// The agent called `finish`.
    Finished {
        summary: String,
    },
    /// The model answered without tool calls; its text is the summary.
    Replied {
        summary: String,
    },
    StepCap,
    /// The agent kept writing what its workspace already holds after the self-check refused
    /// that very workspace (see `repeat_guard::MAX_REPEATED_FINDINGS`), or sent the very call
    /// that failed again and again (`repeat_guard::MAX_IDENTICAL_FAILURES`): the episode ends
    /// so the next round starts from a fresh context.
    Stuck,
    TimedOut(Duration),
    /// The loop's usage reached `LoopLimits::max_tokens` (the run's token budget left).
    TokenBudget(u64),
    ModelFailed(ModelError),
}

#[derive(Debug)]
pub struct LoopReport {
    pub end: LoopEnd,
    /// Model calls made.
    pub steps: u32,
    /// Tool calls carried out (`finish` included).
    pub tool_calls: u32,
    pub usage: Usage,
    /// Fresh agents started from a handoff.
    pub resets: u32,
    /// Times old tool output was compacted.
    pub compactions: u32,
    /// Times a self-check refused `finish` (the step-cap check included).
    pub self_check_refusals: u32,
    /// Replies cut off inside a tool call that the loop answered and asked again.
    pub cut_calls: u32,
    /// Smaller versions of the first prompt taken because the model's window refused the
    /// prompt before them (see `prompt_fit`).
    pub smaller_prompts: u32,
}
