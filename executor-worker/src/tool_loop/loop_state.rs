//! What the tool loop keeps across the turns of one episode, and the two things it decides
//! from it alone: the next request's temperature and the restart after a refusal.

use loopgate_models::{ChatMessage, ChatRequest, ToolSpec};
use loopgate_protocol::usage::Usage;

use crate::observe::Observer;
use crate::self_check::finish_rules::SelfCheckBudget;
use crate::tool_loop::refusal_restart::{collect_written_paths, restart_after_refusal};
use crate::tool_loop::repeat_guard::RepeatGuard;
use crate::tool_loop::temperature::{sibling_seed, turn_temperature};

/// The counters and guards of one episode's loop (one owner: the loop's task).
#[derive(Debug, Default)]
pub(crate) struct LoopState {
    pub(crate) steps: u32,
    pub(crate) tool_calls: u32,
    pub(crate) usage: Usage,
    pub(crate) resets: u32,
    pub(crate) compactions: u32,
    pub(crate) self_checks: SelfCheckBudget,
    pub(crate) self_check_refusals: u32,
    /// Plain replies answered with a nudge to use the tools.
    pub(crate) nudges: u32,
    /// The model reads images (screenshots are attached to their tool results).
    pub(crate) vision: bool,
    /// Repeated writes become an early self-check.
    pub(crate) repeats: RepeatGuard,
    /// The profile's temperature (`None`: the server's default on every turn).
    pub(crate) base_temperature: Option<f32>,
    /// The episode retries a failed audit.
    pub(crate) retrying: bool,
    /// Which sibling of its step the episode is (1-based; 0 reads as the first).
    pub(crate) attempt: u32,
    /// `self_check_refusals` when the conversation last restarted after a refusal.
    pub(crate) restarted_at_refusals: u32,
    /// The files the agent wrote in this episode (across restarts).
    pub(crate) written: Vec<String>,
    /// Replies cut off inside a tool call, answered with a note (see `cut_call`).
    pub(crate) cut_calls: u32,
    /// Times the first prompt was refused for its length and a smaller one taken (see
    /// `prompt_fit`).
    pub(crate) smaller_prompts: u32,
    /// The episode's progress and transcript (the default observes nothing).
    pub(crate) observer: Observer,
}

impl LoopState {
    /// A request for the next turn, at the temperature the retries so far call for (a reply
    /// cut off inside a tool call counts as one: the same sampling runs away again).
    pub(crate) fn request(&self, messages: &[ChatMessage], specs: &[ToolSpec]) -> ChatRequest {
        let mut request = ChatRequest::new(messages.to_vec()).with_tools(specs.to_vec());
        let retries = self.self_check_refusals
            + u32::from(self.retrying)
            + self.cut_calls
            + self.attempt.saturating_sub(1);
        request.temperature = turn_temperature(self.base_temperature, retries);
        request.seed = sibling_seed(self.attempt);
        request
    }

    /// After a refusal not yet acted on: `messages` starts again from `base` with the refused
    /// turn (see `refusal_restart`). True when it did.
    pub(crate) fn restart_after_refusal(
        &mut self,
        base: &[ChatMessage],
        messages: &mut Vec<ChatMessage>,
    ) -> bool {
        if self.self_check_refusals == self.restarted_at_refusals {
            return false;
        }
        self.restarted_at_refusals = self.self_check_refusals;
        collect_written_paths(messages, &mut self.written);
        let before = messages.len();
        *messages = restart_after_refusal(base, messages, &self.written);
        tracing::info!(
            dropped = before.saturating_sub(messages.len()),
            written = self.written.len(),
            "finish was refused: the conversation starts again from the prompt with the refused turn"
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Siblings of a step are sampled apart: sibling k samples k - 1 retries wider and asks for
    /// seed k; the first samples as a step of one episode.
    #[test]
    fn siblings_sample_apart() {
        // (attempt, profile temperature, asked temperature, seed)
        let cases = [
            (0, Some(0.2), Some(0.2), None),
            (1, Some(0.2), Some(0.2), None),
            (2, Some(0.2), Some(0.5), Some(2)),
            (3, Some(0.2), Some(0.8), Some(3)),
            (3, None, None, Some(3)),
        ];
        for (attempt, base, temperature, seed) in cases {
            let state = LoopState {
                attempt,
                base_temperature: base,
                ..LoopState::default()
            };
            let request = state.request(&[], &[]);
            assert_eq!(request.seed, seed, "{attempt}");
            match (request.temperature, temperature) {
                (None, None) => {}
                (Some(got), Some(want)) => assert!((got - want).abs() < 1e-6, "{attempt}: {got}"),
                (got, want) => panic!("{attempt}: got {got:?}, want {want:?}"),
            }
        }
    }
}
