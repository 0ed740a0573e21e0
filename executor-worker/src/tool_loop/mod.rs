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

pub(crate) mod context_health;
pub(crate) mod context_reset;
pub(crate) mod cut_call;
pub(crate) mod loop_state;
pub(crate) mod plain_reply;
pub(crate) mod refusal_restart;
pub(crate) mod refused_writes;
pub(crate) mod repeat_guard;
pub(crate) mod temperature;
pub(crate) mod turn_messages;

use std::future::Future;
use std::time::Duration;

use loopgate_models::tool_call_recovery::strip_tool_calls;
use loopgate_models::{
    ChatClient, ChatMessage, ChatRequest, ChatResponse, ModelError, ModelErrorKind, ToolSpec,
};
use loopgate_protocol::usage::Usage;
use tracing::Instrument;

use crate::self_check::finish_rules::{step_cap_message, FinishEffect, SelfCheckBudget};
use crate::tool_loop::context_health::{ContextHealth, HealthLevel, HealthPolicy};
use crate::tool_loop::context_reset::{
    compact_tool_results, fresh_prompt, mechanical_handoff, HANDOFF_FILE, HANDOFF_REQUEST,
    KEEP_RECENT_TOOL_RESULTS, MAX_HANDOFF_CHARS,
};
use crate::tool_loop::cut_call::{ask_again_after_cut_call, MAX_CUT_CALLS};
use crate::tool_loop::loop_state::LoopState;
use crate::tool_loop::plain_reply::{echoed_tool_result, no_tool_nudge, MAX_NO_TOOL_NUDGES};
use crate::tool_loop::refused_writes::marker_write;
use crate::tool_loop::repeat_guard::{repeated_write_text, AfterCall, REPEAT_PASSED_SUMMARY};
pub(crate) use crate::tool_loop::turn_messages::{
    give_call_ids, keep_recent_images, recover_named_calls, summary_from_text, MAX_IMAGES_KEPT,
};
use crate::tools::dispatch::{EpisodeTools, ToolAction};

/// Model turns an agent gets to write its handoff.
const HANDOFF_TURNS: u32 = 2;

/// Anything that answers chat requests; `ChatClient` in production.
pub trait ChatModel: Sync {
    fn chat(
        &self,
        req: &ChatRequest,
    ) -> impl Future<Output = Result<ChatResponse, ModelError>> + Send;

    /// The model's context window in tokens, when known.
    fn context_window(&self) -> Option<u32> {
        None
    }

    /// Whether the model reads images (its profile's `vision`): screenshots then go with
    /// their tool results.
    fn vision(&self) -> bool {
        false
    }

    /// The profile's `temperature`, when it sets one (retries raise it: see `temperature`).
    fn temperature(&self) -> Option<f32> {
        None
    }
}

impl ChatModel for ChatClient {
    fn chat(
        &self,
        req: &ChatRequest,
    ) -> impl Future<Output = Result<ChatResponse, ModelError>> + Send {
        ChatClient::chat(self, req)
    }

    fn context_window(&self) -> Option<u32> {
        self.profile().context_window
    }

    fn vision(&self) -> bool {
        self.profile().vision
    }

    fn temperature(&self) -> Option<f32> {
        self.profile().temperature
    }
}

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
    /// that very workspace (see `repeat_guard::MAX_REPEATED_FINDINGS`): the episode ends so the next round
    /// starts from a fresh context.
    Stuck,
    TimedOut(Duration),
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
}

/// How one model turn ended.
enum TurnEnd {
    Continue,
    Finished {
        summary: String,
    },
    /// No tool calls; the raw text.
    Replied {
        text: String,
    },
    /// See `LoopEnd::Stuck`.
    Stuck,
}

/// Run the loop from `prompt` (system + first user message).
pub async fn run_tool_loop<M: ChatModel>(
    model: &M,
    tools: &EpisodeTools,
    prompt: Vec<ChatMessage>,
    limits: LoopLimits,
) -> LoopReport {
    let mut state = LoopState {
        self_checks: SelfCheckBudget::new(tools.self_checks_allowed()),
        vision: model.vision(),
        base_temperature: model.temperature(),
        retrying: limits.retrying,
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
    }
}

async fn drive<M: ChatModel>(
    model: &M,
    tools: &EpisodeTools,
    prompt: Vec<ChatMessage>,
    limits: &LoopLimits,
    state: &mut LoopState,
) -> LoopEnd {
    let specs = tools.specs();
    let max_steps = limits.max_steps.max(1);
    let max_resets = limits.health.max_resets;
    let task = prompt.clone();
    // Where a restart after a refusal begins: the prompt, or the fresh agent's after a reset.
    let mut base = prompt.clone();
    let mut messages = prompt;
    let mut health = ContextHealth::new(limits.health);
    while state.steps < max_steps {
        if state.restart_after_refusal(&base, &mut messages) {
            health = ContextHealth::new(limits.health);
        }
        if health.needs_reset() && state.resets < max_resets {
            let notes =
                match write_handoff(model, tools, &mut messages, &specs, max_steps, state).await {
                    Ok(notes) => notes,
                    Err(end) => return end,
                };
            state.resets += 1;
            tracing::info!(
                reset = state.resets,
                score = health.score(),
                utilization = health.utilization(),
                "context health below threshold: continuing with a fresh agent"
            );
            messages = fresh_prompt(&task, &notes, state.resets);
            base = messages.clone();
            health = ContextHealth::new(limits.health);
            continue;
        }
        if health.level() >= HealthLevel::Warn
            && compact_tool_results(&mut messages, KEEP_RECENT_TOOL_RESULTS) > 0
        {
            health.note_compaction();
            state.compactions += 1;
            tracing::debug!(score = health.score(), "compacted old tool output");
        }
        let request = state.request(&messages, &specs);
        let response = match model.chat(&request).await {
            Ok(response) => response,
            Err(err)
                if err.kind() == ModelErrorKind::ContextLength && state.resets < max_resets =>
            {
                state.resets += 1;
                tracing::warn!(reset = state.resets, error = %err, "prompt no longer fits: continuing with a fresh agent");
                let notes = read_handoff(tools).unwrap_or_else(|| mechanical_handoff(&messages));
                messages = fresh_prompt(&task, &notes, state.resets);
                base = messages.clone();
                health = ContextHealth::new(limits.health);
                continue;
            }
            Err(err)
                if err.kind() == ModelErrorKind::CutToolCall && state.cut_calls < MAX_CUT_CALLS =>
            {
                // The runaway reply was generated, so it spends a step; its usage is unknown.
                state.steps += 1;
                state.cut_calls += 1;
                tracing::warn!(cut_calls = state.cut_calls, error = %err, "the reply was cut off inside a tool call: the model is told and asked again");
                ask_again_after_cut_call(&mut messages);
                continue;
            }
            Err(err) => return LoopEnd::ModelFailed(err),
        };
        state.steps += 1;
        state.usage.add(response.usage);
        health.observe(response.usage.input_tokens, response.usage.output_tokens);
        match run_turn(tools, &mut messages, response, state).await {
            TurnEnd::Continue => {}
            TurnEnd::Stuck => return LoopEnd::Stuck,
            TurnEnd::Finished { summary } => return LoopEnd::Finished { summary },
            TurnEnd::Replied { text } => {
                if goes_on_after_plain_reply(tools, &mut messages, &specs, &text, state).await {
                    continue;
                }
                return LoopEnd::Replied {
                    summary: summary_from_text(&text),
                };
            }
        }
    }
    after_step_cap(model, tools, &base, &mut messages, &specs, state).await
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
    let response = match model.chat(&request).await {
        Ok(response) => response,
        Err(err) => {
            tracing::warn!(error = %err, "the last turn after the step cap failed");
            return LoopEnd::StepCap;
        }
    };
    state.steps += 1;
    state.usage.add(response.usage);
    match run_turn(tools, messages, response, state).await {
        TurnEnd::Finished { summary } => LoopEnd::Finished { summary },
        TurnEnd::Replied { text } => LoopEnd::Replied {
            summary: summary_from_text(&text),
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
    specs: &[ToolSpec],
    text: &str,
    state: &mut LoopState,
) -> bool {
    if state.tool_calls == 0 {
        if state.nudges >= MAX_NO_TOOL_NUDGES {
            return false;
        }
        state.nudges += 1;
        let names: Vec<String> = specs.iter().map(|spec| spec.name.clone()).collect();
        messages.push(ChatMessage::assistant_text(text));
        messages.push(ChatMessage::user(no_tool_nudge(text, &names)));
        tracing::info!("the model replied without calling a tool: nudged to use the tools");
        return true;
    }
    match self_check_before_finish(tools, state).await {
        FinishEffect::Accept => false,
        FinishEffect::Refuse { text: refusal, .. } => {
            messages.push(ChatMessage::assistant_text(text));
            messages.push(ChatMessage::user(refusal));
            true
        }
    }
}

/// The self-check `finish` gets (see `EpisodeTools::check_before_finish`), counting refusals.
async fn self_check_before_finish(tools: &EpisodeTools, state: &mut LoopState) -> FinishEffect {
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
    if let FinishEffect::Refuse { failing, .. } = &effect {
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

/// Runs the tools of one reply and appends the turn to `messages`.
async fn run_turn(
    tools: &EpisodeTools,
    messages: &mut Vec<ChatMessage>,
    mut response: ChatResponse,
    state: &mut LoopState,
) -> TurnEnd {
    // The specs are built only for a reply without calls (the rare case).
    if response.tool_calls.is_empty() && recover_named_calls(&mut response, &tools.specs()) {
        tracing::info!(
            tool_calls = response.tool_calls.len(),
            "the reply wrote its calls as a tool's name and its arguments: they run as calls"
        );
    }
    tracing::debug!(
        step = state.steps,
        tool_calls = response.tool_calls.len(),
        from_content = response.tool_calls_from_content,
        "model replied"
    );
    if response.tool_calls.is_empty() {
        return TurnEnd::Replied {
            text: response.content.unwrap_or_default(),
        };
    }
    let mut assistant = response.to_assistant_message();
    give_call_ids(&mut assistant, state.tool_calls);
    let calls = match &assistant {
        ChatMessage::Assistant { tool_calls, .. } => tool_calls.clone(),
        _ => Vec::new(),
    };
    messages.push(assistant);
    for call in &calls {
        state.tool_calls += 1;
        if let Some(refusal) = echoed_tool_result(messages, call) {
            tracing::info!(tool = %call.name, "refused a write of an earlier tool result's text");
            messages.push(ChatMessage::tool_result(&call.id, &call.name, refusal));
            continue;
        }
        if let Some(refusal) = marker_write(call) {
            tracing::info!(tool = %call.name, "refused a write of the removed-text marker");
            messages.push(ChatMessage::tool_result(&call.id, &call.name, refusal));
            continue;
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
                FinishEffect::Accept => {
                    return TurnEnd::Finished {
                        summary: summary_from_text(&summary),
                    }
                }
                FinishEffect::Refuse { text, .. } => {
                    messages.push(ChatMessage::tool_result(&call.id, &call.name, text));
                }
            },
            ToolAction::Continue { result, ok, images } => {
                tracing::debug!(tool = %call.name, ok, images = images.len(), "tool ran");
                let result = match after_repeat(tools, call, ok, &result, state).await {
                    Repeated::Finished => {
                        return TurnEnd::Finished {
                            summary: REPEAT_PASSED_SUMMARY.to_string(),
                        }
                    }
                    Repeated::Answer(text) => text,
                    Repeated::Stuck(text) => {
                        messages.push(ChatMessage::tool_result(&call.id, &call.name, text));
                        return TurnEnd::Stuck;
                    }
                    Repeated::No => result,
                };
                if state.vision && !images.is_empty() {
                    keep_recent_images(messages, MAX_IMAGES_KEPT - 1);
                    messages.push(ChatMessage::tool_result_with_images(
                        &call.id, &call.name, result, images,
                    ));
                } else {
                    messages.push(ChatMessage::tool_result(&call.id, &call.name, result));
                }
            }
        }
    }
    TurnEnd::Continue
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
    call: &loopgate_models::ToolCall,
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

/// Asks the agent for its handoff (a couple of turns, counted as steps) and returns the notes:
/// the `progress.md` it wrote, else what it answered, else a handoff written by the harness.
/// `Err` when the agent called `finish` instead: the loop ends there.
async fn write_handoff<M: ChatModel>(
    model: &M,
    tools: &EpisodeTools,
    messages: &mut Vec<ChatMessage>,
    specs: &[ToolSpec],
    max_steps: u32,
    state: &mut LoopState,
) -> Result<String, LoopEnd> {
    let before = read_handoff(tools);
    messages.push(ChatMessage::user(HANDOFF_REQUEST));
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
            TurnEnd::Replied { text } => {
                let text = strip_tool_calls(&text);
                if let Some(notes) = new_handoff(tools, before.as_deref()) {
                    return Ok(notes);
                }
                if !text.trim().is_empty() {
                    return Ok(text);
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
fn read_handoff(tools: &EpisodeTools) -> Option<String> {
    tools
        .workspace()
        .read_file(HANDOFF_FILE, MAX_HANDOFF_CHARS * 4)
        .ok()
        .filter(|text| !text.trim().is_empty())
}

#[cfg(test)]
mod tests;
