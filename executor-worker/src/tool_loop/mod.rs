//! The LLM tool loop of one episode: ask the model, run the tools it calls, feed the results
//! back, until it calls `finish`, answers without tool calls, hits the step cap or the deadline,
//! or the model call fails.
//!
//! With a self-check (`crate::self_check`), `finish` first runs the step's blocking checks on
//! a copy of the workspace; while one fails, `finish` is answered with a `finish refused:` tool
//! result and the loop goes on (at most `self_checks` times). At the step cap one more
//! self-check runs when one is left; if it fails, the agent gets one last turn with the
//! refusal (so an episode makes at most `max_steps + 1` model calls), then the loop ends.
//! An agent that keeps repeating a write of what the refused workspace already holds gets
//! the findings again once; its next such write ends the episode (`LoopEnd::Stuck`), so the
//! round's remaining turns are not spent on it and the next round starts afresh.
//! After each refusal the conversation starts again from the episode's prompt, with a note
//! naming the files written so far and the refused turn with its answer (see
//! `refusal_restart`): the agent writes the file anew instead of copying what just failed,
//! and the calls after a refusal do not re-send everything before it.
//!
//! Context health is tracked per agent (see `context_health`): at the warn level old tool
//! output is compacted; when the score drops below the threshold the agent is asked to write
//! `progress.md` and a fresh agent continues from it (at most `max_resets` times). A
//! context-length error from the model also resets, with a handoff written by the harness.
//! A reply cut off inside a tool call is answered with a note and asked again (see `cut_call`).
//! A first prompt the model refuses for its length is replaced by a smaller version of it
//! (see `prompt_fit`).

pub(crate) mod chat_model;
pub(crate) mod context_health;
pub(crate) mod context_reset;
pub(crate) mod cut_call;
pub(crate) mod handoff;
pub(crate) mod loop_end;
pub(crate) mod loop_state;
pub(crate) mod plain_reply;
pub(crate) mod prompt_fit;
pub(crate) mod refusal_restart;
pub(crate) mod refused_writes;
pub(crate) mod repeat_guard;
pub(crate) mod temperature;
pub(crate) mod turn;
pub(crate) mod turn_messages;

use loopgate_models::tool_call_recovery::TextReply;
use loopgate_models::{ChatMessage, ModelError, ModelErrorKind, ToolSpec};

use crate::observe::Observer;
use crate::self_check::finish_rules::{step_cap_message, FinishEffect, SelfCheckBudget};
pub(crate) use crate::tool_loop::chat_model::ChatModel;
use crate::tool_loop::context_health::{ContextHealth, HealthLevel, HealthPolicy};
use crate::tool_loop::context_reset::{
    compact_tool_results, fresh_prompt, mechanical_handoff, KEEP_RECENT_TOOL_RESULTS,
};
use crate::tool_loop::cut_call::{ask_again_after_cut_call, MAX_CUT_CALLS};
use crate::tool_loop::handoff::{read_handoff, write_handoff};
pub(crate) use crate::tool_loop::loop_end::LoopReport;
pub use crate::tool_loop::loop_end::{LoopEnd, LoopLimits};
use crate::tool_loop::loop_state::LoopState;
use crate::tool_loop::plain_reply::{no_tool_nudge, MAX_NO_TOOL_NUDGES};
pub use crate::tool_loop::prompt_fit::EpisodePrompt;
use crate::tool_loop::turn::{run_turn, self_check_before_finish, TurnEnd};
use crate::tool_loop::turn_messages::bounded_summary;
pub(crate) use crate::tool_loop::turn_messages::summary_from_text;
use crate::tools::dispatch::EpisodeTools;

/// Run the loop from `prompt` (system + first user message, and smaller versions of it).
pub async fn run_tool_loop<M: ChatModel>(
    model: &M,
    tools: &EpisodeTools,
    prompt: impl Into<EpisodePrompt>,
    limits: LoopLimits,
) -> LoopReport {
    run_tool_loop_observed(model, tools, prompt.into(), limits, Observer::default()).await
}

/// [`run_tool_loop`], telling `observer` what happens (progress and transcript).
pub(crate) async fn run_tool_loop_observed<M: ChatModel>(
    model: &M,
    tools: &EpisodeTools,
    prompt: EpisodePrompt,
    limits: LoopLimits,
    observer: Observer,
) -> LoopReport {
    let mut state = LoopState {
        observer,
        self_checks: SelfCheckBudget::new(tools.self_checks_allowed()),
        vision: model.vision(),
        base_temperature: model.temperature(),
        retrying: limits.retrying,
        attempt: limits.attempt,
        ..LoopState::default()
    };
    let driven = tokio::time::timeout(
        limits.episode,
        drive(model, tools, prompt, &limits, &mut state),
    )
    .await;
    let end = driven.unwrap_or(LoopEnd::TimedOut(limits.episode));
    LoopReport {
        end,
        steps: state.steps,
        tool_calls: state.tool_calls,
        usage: state.usage,
        resets: state.resets,
        compactions: state.compactions,
        self_check_refusals: state.self_check_refusals,
        cut_calls: state.cut_calls,
        smaller_prompts: state.smaller_prompts,
    }
}

/// One agent's conversation and the health of its context.
struct Conversation {
    /// The episode's prompt, which a fresh agent starts from.
    task: Vec<ChatMessage>,
    /// Where a restart after a refusal begins: the prompt, or the fresh agent's after a reset.
    base: Vec<ChatMessage>,
    messages: Vec<ChatMessage>,
    health: ContextHealth,
    /// Smaller versions of the prompt, for a first call refused for its length.
    smaller: std::collections::VecDeque<Vec<ChatMessage>>,
}

impl Conversation {
    fn new(prompt: EpisodePrompt, policy: HealthPolicy) -> Self {
        Conversation {
            task: prompt.messages.clone(),
            base: prompt.messages.clone(),
            messages: prompt.messages,
            health: ContextHealth::new(policy),
            smaller: prompt.smaller,
        }
    }

    /// Before the first turn: the next smaller version of the prompt replaces it. False when
    /// none is left.
    fn shrink(&mut self) -> bool {
        let Some(smaller) = self.smaller.pop_front() else {
            return false;
        };
        self.task = smaller.clone();
        self.base = smaller.clone();
        self.messages = smaller;
        true
    }

    /// A fresh agent continues from the handoff `notes` (reset number `resets`).
    fn reset(&mut self, notes: &str, resets: u32, policy: HealthPolicy) {
        self.messages = fresh_prompt(&self.task, notes, resets);
        self.base = self.messages.clone();
        self.health = ContextHealth::new(policy);
    }
}

async fn drive<M: ChatModel>(
    model: &M,
    tools: &EpisodeTools,
    prompt: EpisodePrompt,
    limits: &LoopLimits,
    state: &mut LoopState,
) -> LoopEnd {
    let specs = tools.specs();
    let max_steps = limits.max_steps.max(1);
    let mut talk = Conversation::new(prompt, limits.health);
    while state.steps < max_steps {
        if let Some(max) = limits.max_tokens.filter(|max| state.usage.total() >= *max) {
            return LoopEnd::TokenBudget(max);
        }
        if state.restart_after_refusal(&talk.base, &mut talk.messages) {
            talk.health = ContextHealth::new(limits.health);
        }
        if talk.health.needs_reset() && state.resets < limits.health.max_resets {
            let notes =
                write_handoff(model, tools, &mut talk.messages, &specs, max_steps, state).await;
            let notes = match notes {
                Ok(notes) => notes,
                Err(end) => return end,
            };
            state.resets += 1;
            tracing::info!(
                reset = state.resets,
                score = talk.health.score(),
                utilization = talk.health.utilization(),
                "context health below threshold: continuing with a fresh agent"
            );
            talk.reset(&notes, state.resets, limits.health);
            continue;
        }
        compact_when_warned(&mut talk, state);
        let request = state.request(&talk.messages, &specs);
        state.observer.awaiting_model(state.steps + 1);
        let response = match model.chat(&request).await {
            Ok(response) => response,
            Err(err) => match after_failed_call(err, tools, &mut talk, limits, state) {
                Ok(()) => continue,
                Err(end) => return end,
            },
        };
        state.steps += 1;
        state.usage.add(response.usage);
        observe_reply(state, &response);
        talk.health
            .observe(response.usage.input_tokens, response.usage.output_tokens);
        match run_turn(tools, &mut talk.messages, response, state).await {
            TurnEnd::Continue => {}
            TurnEnd::Stuck => return LoopEnd::Stuck,
            TurnEnd::Finished { summary } => return LoopEnd::Finished { summary },
            TurnEnd::Replied(reply) => {
                if goes_on_after_plain_reply(tools, &mut talk.messages, &reply, state).await {
                    continue;
                }
                return LoopEnd::Replied {
                    summary: bounded_summary(&reply.without_calls),
                };
            }
        }
    }
    after_step_cap(model, tools, &talk.base, &mut talk.messages, &specs, state).await
}

/// The reply of the turn just counted, to the observer.
fn observe_reply(state: &LoopState, response: &loopgate_models::ChatResponse) {
    let tokens =
        |u: &loopgate_protocol::usage::Usage| u.input_tokens.saturating_add(u.output_tokens);
    state.observer.model_turn(
        state.steps,
        response.content.as_deref().unwrap_or(""),
        tokens(&response.usage),
        tokens(&state.usage),
    );
}

/// At the warn level of context health, old tool output is compacted.
fn compact_when_warned(talk: &mut Conversation, state: &mut LoopState) {
    if talk.health.level() >= HealthLevel::Warn
        && compact_tool_results(&mut talk.messages, KEEP_RECENT_TOOL_RESULTS) > 0
    {
        talk.health.note_compaction();
        state.compactions += 1;
        tracing::debug!(score = talk.health.score(), "compacted old tool output");
    }
}

/// After a failed model call: a first prompt that does not fit is replaced by its next smaller
/// version (none left: the loop ends, since a fresh agent starts from the same prompt); a
/// prompt that no longer fits later continues with a fresh agent (a handoff written by the
/// harness when the agent wrote none), and a reply cut off inside a tool call is answered with
/// a note and asked again, each while resets or cut calls are left (`Ok`: the loop goes on).
/// Anything else ends the loop.
fn after_failed_call(
    err: ModelError,
    tools: &EpisodeTools,
    talk: &mut Conversation,
    limits: &LoopLimits,
    state: &mut LoopState,
) -> Result<(), LoopEnd> {
    let first_turn = state.steps == 0 && state.resets == 0;
    match err.kind() {
        ModelErrorKind::ContextLength if first_turn => {
            if !talk.shrink() {
                return Err(LoopEnd::ModelFailed(err));
            }
            state.smaller_prompts += 1;
            tracing::warn!(smaller_prompts = state.smaller_prompts, error = %err, "the first prompt does not fit the model's window: going on with a smaller one");
            Ok(())
        }
        ModelErrorKind::ContextLength if state.resets < limits.health.max_resets => {
            state.resets += 1;
            tracing::warn!(reset = state.resets, error = %err, "prompt no longer fits: continuing with a fresh agent");
            let notes = read_handoff(tools).unwrap_or_else(|| mechanical_handoff(&talk.messages));
            talk.reset(&notes, state.resets, limits.health);
            Ok(())
        }
        ModelErrorKind::CutToolCall if state.cut_calls < MAX_CUT_CALLS => {
            // The runaway reply was generated, so it spends a step; its usage is unknown.
            state.steps += 1;
            state.cut_calls += 1;
            tracing::warn!(cut_calls = state.cut_calls, error = %err, "the reply was cut off inside a tool call: the model is told and asked again");
            ask_again_after_cut_call(&mut talk.messages);
            Ok(())
        }
        _ => Err(LoopEnd::ModelFailed(err)),
    }
}

/// At the step cap: one more self-check when one is left. When it fails, the agent gets one
/// last turn with the refusal (no self-check after it), then the loop ends.
async fn after_step_cap<M: ChatModel>(
    model: &M,
    tools: &EpisodeTools,
    base: &[ChatMessage],
    messages: &mut Vec<ChatMessage>,
    specs: &[ToolSpec],
    state: &mut LoopState,
) -> LoopEnd {
    let refusal = match self_check_before_finish(tools, state).await {
        FinishEffect::Accept => return LoopEnd::StepCap,
        FinishEffect::Refuse { text, .. } => text,
    };
    state.self_checks.close();
    messages.push(ChatMessage::user(step_cap_message(&refusal)));
    state.restart_after_refusal(base, messages);
    let request = state.request(messages, specs);
    state.observer.awaiting_model(state.steps + 1);
    let response = match model.chat(&request).await {
        Ok(response) => response,
        Err(err) => {
            tracing::warn!(error = %err, "the last turn after the step cap failed");
            return LoopEnd::StepCap;
        }
    };
    state.steps += 1;
    state.usage.add(response.usage);
    observe_reply(state, &response);
    match run_turn(tools, messages, response, state).await {
        TurnEnd::Finished { summary } => LoopEnd::Finished { summary },
        TurnEnd::Replied(reply) => LoopEnd::Replied {
            summary: bounded_summary(&reply.without_calls),
        },
        TurnEnd::Continue => LoopEnd::StepCap,
        TurnEnd::Stuck => LoopEnd::Stuck,
    }
}

/// A reply without tool calls ends the episode unless the loop can still help: the first
/// such reply before any tool ran gets a nudge to use the tools (a tool call written as plain
/// text calls nothing), and a plain reply after tools ran counts as `finish`, so the self-check
/// runs and may refuse it. True when the loop goes on.
async fn goes_on_after_plain_reply(
    tools: &EpisodeTools,
    messages: &mut Vec<ChatMessage>,
    reply: &TextReply,
    state: &mut LoopState,
) -> bool {
    if state.tool_calls == 0 {
        if state.nudges >= MAX_NO_TOOL_NUDGES {
            return false;
        }
        state.nudges += 1;
        messages.push(ChatMessage::assistant_text(&reply.text));
        messages.push(ChatMessage::user(no_tool_nudge(
            reply.looks_like_call,
            &tools.tool_names(),
        )));
        tracing::info!("the model replied without calling a tool: nudged to use the tools");
        return true;
    }
    match self_check_before_finish(tools, state).await {
        FinishEffect::Accept => false,
        FinishEffect::Refuse { text: refusal, .. } => {
            messages.push(ChatMessage::assistant_text(&reply.text));
            messages.push(ChatMessage::user(refusal));
            true
        }
    }
}

#[cfg(test)]
mod tests;
