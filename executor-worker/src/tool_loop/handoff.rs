//! The agent's handoff at a context reset: it is asked to write `progress.md` (a couple of
//! turns, counted as steps), and the notes the fresh agent continues from are read back.

use loopgate_models::{ChatMessage, ToolSpec};

use crate::tool_loop::chat_model::ChatModel;
use crate::tool_loop::context_reset::{
    handoff_request, mechanical_handoff, HANDOFF_FILE, MAX_HANDOFF_CHARS,
};
use crate::tool_loop::loop_end::LoopEnd;
use crate::tool_loop::loop_state::LoopState;
use crate::tool_loop::turn::{run_turn, TurnEnd};
use crate::tools::dispatch::EpisodeTools;

/// Model turns an agent gets to write its handoff.
const HANDOFF_TURNS: u32 = 2;

/// Asks the agent for its handoff (a couple of turns, counted as steps) and returns the notes:
/// the `progress.md` it wrote, else what it answered, else a handoff written by the harness.
/// `Err` when the agent called `finish` instead: the loop ends there.
pub(crate) async fn write_handoff<M: ChatModel>(
    model: &M,
    tools: &EpisodeTools,
    messages: &mut Vec<ChatMessage>,
    specs: &[ToolSpec],
    max_steps: u32,
    state: &mut LoopState,
) -> Result<String, LoopEnd> {
    let before = read_handoff(tools);
    messages.push(ChatMessage::user(handoff_request()));
    for _ in 0..HANDOFF_TURNS {
        if state.steps >= max_steps {
            break;
        }
        let request = state.request(messages, specs);
        let response = match model.chat(&request).await {
            Ok(response) => response,
            Err(err) => {
                tracing::warn!(error = %err, "the agent could not write its handoff");
                break;
            }
        };
        state.steps += 1;
        state.usage.add(response.usage);
        match run_turn(tools, messages, response, state).await {
            TurnEnd::Finished { summary } => return Err(LoopEnd::Finished { summary }),
            TurnEnd::Stuck => return Err(LoopEnd::Stuck),
            TurnEnd::Replied(reply) => {
                if let Some(notes) = new_handoff(tools, before.as_deref()) {
                    return Ok(notes);
                }
                if !reply.without_calls.trim().is_empty() {
                    return Ok(reply.without_calls);
                }
                break;
            }
            TurnEnd::Continue => {
                if let Some(notes) = new_handoff(tools, before.as_deref()) {
                    return Ok(notes);
                }
            }
        }
    }
    Ok(new_handoff(tools, before.as_deref()).unwrap_or_else(|| mechanical_handoff(messages)))
}

/// The workspace's `progress.md` when it differs from `before` (was written just now).
fn new_handoff(tools: &EpisodeTools, before: Option<&str>) -> Option<String> {
    read_handoff(tools).filter(|now| Some(now.as_str()) != before)
}

/// The workspace's `progress.md`, when there is a non-empty one.
pub(crate) fn read_handoff(tools: &EpisodeTools) -> Option<String> {
    tools
        .workspace()
        .read_file(HANDOFF_FILE, MAX_HANDOFF_CHARS * 4)
        .ok()
        .filter(|text| !text.trim().is_empty())
}
