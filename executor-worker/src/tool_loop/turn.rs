//! One model turn: the reply read for its calls (see `loopgate_models::tool_call_recovery`),
//! each call run (or refused) and the turn appended to the conversation; and the self-check
//! that `finish` gets.

use loopgate_models::tool_call_recovery::{read_reply, CallSource, TextReply, ToolReply};
use loopgate_models::{ChatMessage, ChatResponse, ImagePart, ToolCall};
use tracing::Instrument;

use crate::self_check::finish_rules::FinishEffect;
use crate::tool_loop::loop_state::LoopState;
use crate::tool_loop::plain_reply::echoed_tool_result;
use crate::tool_loop::refused_writes::marker_write;
use crate::tool_loop::repeat_guard::{repeated_write_text, AfterCall, REPEAT_PASSED_SUMMARY};
use crate::tool_loop::turn_messages::{
    give_call_ids, keep_recent_images, summary_from_text, MAX_IMAGES_KEPT,
};
use crate::tools::dispatch::EpisodeTools;
use crate::tools::tool_def::ToolAction;

/// How one model turn ended.
pub(crate) enum TurnEnd {
    Continue,
    Finished {
        summary: String,
    },
    /// No tool calls.
    Replied(TextReply),
    /// See `LoopEnd::Stuck`.
    Stuck,
}

/// Runs the tools of one reply and appends the turn to `messages`.
pub(crate) async fn run_turn(
    tools: &EpisodeTools,
    messages: &mut Vec<ChatMessage>,
    response: ChatResponse,
    state: &mut LoopState,
) -> TurnEnd {
    let (content, mut calls, source) = match read_reply(response, &tools.tool_names()) {
        ToolReply::Calls {
            content,
            calls,
            source,
        } => (content, calls, source),
        ToolReply::Text(reply) => {
            tracing::debug!(
                step = state.steps,
                tool_calls = 0,
                from_content = false,
                "model replied"
            );
            return TurnEnd::Replied(reply);
        }
    };
    if source == CallSource::ToolNames {
        tracing::info!(
            tool_calls = calls.len(),
            "the reply wrote its calls as a tool's name and its arguments: they run as calls"
        );
    }
    tracing::debug!(
        step = state.steps,
        tool_calls = calls.len(),
        from_content = source != CallSource::Structured,
        "model replied"
    );
    give_call_ids(&mut calls, state.tool_calls);
    messages.push(ChatMessage::Assistant {
        content,
        tool_calls: calls.clone(),
    });
    for call in &calls {
        if let Some(end) = run_call(tools, messages, call, state).await {
            return end;
        }
    }
    TurnEnd::Continue
}

/// Runs one call (or refuses it) and appends its result; `Some` when the turn ends with it.
async fn run_call(
    tools: &EpisodeTools,
    messages: &mut Vec<ChatMessage>,
    call: &ToolCall,
    state: &mut LoopState,
) -> Option<TurnEnd> {
    state.tool_calls += 1;
    state.observer.tool_call(&call.name, &call.arguments_text());
    if let Some(refusal) = echoed_tool_result(messages, call) {
        tracing::info!(tool = %call.name, "refused a write of an earlier tool result's text");
        return refuse_call(messages, call, refusal, state);
    }
    if let Some(refusal) = marker_write(call) {
        tracing::info!(tool = %call.name, "refused a write of the removed-text marker");
        return refuse_call(messages, call, refusal, state);
    }
    let span = tracing::info_span!(
        "execute_tool",
        "otel.name" = %format!("execute_tool {}", call.name),
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = %call.name,
        tool = %call.name,
    );
    match tools.call(call).instrument(span).await {
        ToolAction::Finish { summary } => match self_check_before_finish(tools, state).await {
            FinishEffect::Accept => Some(TurnEnd::Finished {
                summary: summary_from_text(&summary),
            }),
            FinishEffect::Refuse { text, .. } => {
                messages.push(ChatMessage::tool_result(&call.id, &call.name, text));
                None
            }
        },
        ToolAction::Continue { result, ok, images } => {
            tracing::debug!(tool = %call.name, ok, images = images.len(), "tool ran");
            let result = match after_repeat(tools, call, ok, &result, state).await {
                Repeated::Finished => {
                    return Some(TurnEnd::Finished {
                        summary: REPEAT_PASSED_SUMMARY.to_string(),
                    })
                }
                Repeated::Answer(text) => text,
                Repeated::Stuck(text) => {
                    state.observer.tool_result(&call.name, ok, &text);
                    messages.push(ChatMessage::tool_result(&call.id, &call.name, text));
                    return Some(TurnEnd::Stuck);
                }
                Repeated::No => result,
            };
            state.observer.tool_result(&call.name, ok, &result);
            push_result(messages, call, result, images, state.vision);
            None
        }
    }
}

/// Answers a call refused before it ran with `refusal`. It counts as a failed call: the very
/// same call refused `repeat_guard::MAX_IDENTICAL_FAILURES` times in a row ends the episode
/// (`Stuck`), as a call failing in its tool does.
fn refuse_call(
    messages: &mut Vec<ChatMessage>,
    call: &ToolCall,
    refusal: String,
    state: &mut LoopState,
) -> Option<TurnEnd> {
    let (text, end) = match state.repeats.after_call(call, false) {
        AfterCall::FailingAgain(times) => {
            tracing::info!(tool = %call.name, times, "the same call was refused again: the episode ends for a fresh attempt");
            (failing_again_text(&refusal, times), Some(TurnEnd::Stuck))
        }
        _ => (refusal, None),
    };
    state.observer.tool_result(&call.name, false, &text);
    messages.push(ChatMessage::tool_result(&call.id, &call.name, text));
    end
}

/// The result of a call that failed `times` times in a row: the episode ends with it.
fn failing_again_text(result: &str, times: u32) -> String {
    format!(
        "{result}\n\n[loopgate: this very call failed {times} times in a row; the episode ends \
         here and the step starts again from a fresh prompt]"
    )
}

/// A tool's result, with its images for a vision model (which keeps the latest few).
fn push_result(
    messages: &mut Vec<ChatMessage>,
    call: &ToolCall,
    result: String,
    images: Vec<ImagePart>,
    vision: bool,
) {
    if vision && !images.is_empty() {
        keep_recent_images(messages, MAX_IMAGES_KEPT - 1);
        messages.push(ChatMessage::tool_result_with_images(
            &call.id, &call.name, result, images,
        ));
    } else {
        messages.push(ChatMessage::tool_result(&call.id, &call.name, result));
    }
}

/// What a repeated write turned into.
enum Repeated {
    /// Not a repeat (or no self-check to run): the call's own result.
    No,
    /// The tool result to give instead.
    Answer(String),
    /// The self-check ran and passed: the episode ends as if the agent called `finish`.
    Finished,
    /// The tool result to give, and the episode ends (`LoopEnd::Stuck`).
    Stuck(String),
}

/// The second identical write in a row: run the self-check now when the workspace changed
/// since the last one (otherwise repeat its findings), so a model that repeats itself sees
/// why its content fails instead of spending its steps (see `repeat_guard`).
async fn after_repeat(
    tools: &EpisodeTools,
    call: &ToolCall,
    ok: bool,
    result: &str,
    state: &mut LoopState,
) -> Repeated {
    match state.repeats.after_call(call, ok) {
        AfterCall::Nothing => Repeated::No,
        AfterCall::RepeatFindings(refusal) => {
            tracing::info!(tool = %call.name, "a repeated write: the last self-check's findings again");
            Repeated::Answer(repeated_write_text(result, &refusal))
        }
        AfterCall::FailingAgain(times) => {
            tracing::info!(tool = %call.name, times, "the same call failed again: the episode ends for a fresh attempt");
            Repeated::Stuck(failing_again_text(result, times))
        }
        AfterCall::Stuck(refusal) => {
            tracing::info!(tool = %call.name, "a repeated write after its findings were repeated: the episode ends for a fresh attempt");
            Repeated::Stuck(repeated_write_text(result, &refusal))
        }
        AfterCall::CheckNow => {
            if !tools.can_self_check(&state.self_checks) {
                return Repeated::No;
            }
            tracing::info!(tool = %call.name, "a repeated write: self-check now");
            match self_check_before_finish(tools, state).await {
                FinishEffect::Accept => Repeated::Finished,
                FinishEffect::Refuse { text, .. } => {
                    Repeated::Answer(repeated_write_text(result, &text))
                }
            }
        }
    }
}

/// The self-check `finish` gets (see `EpisodeTools::check_before_finish`), counting refusals.
pub(crate) async fn self_check_before_finish(
    tools: &EpisodeTools,
    state: &mut LoopState,
) -> FinishEffect {
    let ran = tools.can_self_check(&state.self_checks);
    let effect = tools
        .check_before_finish(&mut state.self_checks)
        .instrument(tracing::info_span!("self_check"))
        .await;
    if ran {
        let refusal = match &effect {
            FinishEffect::Refuse { text, .. } => Some(text.as_str()),
            FinishEffect::Accept => None,
        };
        state.repeats.checked(refusal);
    }
    if let FinishEffect::Refuse { failing, text } = &effect {
        state.observer.refusal(text);
        state.self_check_refusals += 1;
        tracing::info!(
            failing,
            refusals = state.self_check_refusals,
            self_checks_used = state.self_checks.used(),
            "finish refused: blocking checks still fail on the workspace"
        );
    }
    effect
}
