//! The LLM tool loop of one episode: ask the model, run the tools it calls, feed the results
//! back, until it calls `finish`, answers without tool calls, hits the step cap or the deadline,
//! or the model call fails.

use std::future::Future;
use std::time::Duration;

use loopgate_common::tool_call_parse::strip_tool_calls;
use loopgate_common::usage::Usage;
use loopgate_models::{ChatClient, ChatMessage, ChatRequest, ChatResponse, ModelError};
use tracing::Instrument;

use crate::tool_dispatch::{tool_specs, EpisodeTools, ToolAction};

/// Longest summary kept from the model's own words.
pub const MAX_SUMMARY_CHARS: usize = 2000;

/// Anything that answers chat requests; `ChatClient` in production.
pub trait ChatModel: Sync {
    fn chat(
        &self,
        req: &ChatRequest,
    ) -> impl Future<Output = Result<ChatResponse, ModelError>> + Send;
}

impl ChatModel for ChatClient {
    fn chat(
        &self,
        req: &ChatRequest,
    ) -> impl Future<Output = Result<ChatResponse, ModelError>> + Send {
        ChatClient::chat(self, req)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopLimits {
    /// Model calls at most.
    pub max_steps: u32,
    /// Wall-clock bound on the whole loop.
    pub episode: Duration,
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
}

#[derive(Debug, Default)]
struct LoopState {
    steps: u32,
    tool_calls: u32,
    usage: Usage,
}

/// Run the loop from `prompt` (system + first user message).
pub async fn run_tool_loop<M: ChatModel>(
    model: &M,
    tools: &EpisodeTools,
    prompt: Vec<ChatMessage>,
    limits: LoopLimits,
) -> LoopReport {
    let mut state = LoopState::default();
    let driven = tokio::time::timeout(
        limits.episode,
        drive(model, tools, prompt, limits.max_steps, &mut state),
    )
    .await;
    let end = driven.unwrap_or(LoopEnd::TimedOut(limits.episode));
    LoopReport {
        end,
        steps: state.steps,
        tool_calls: state.tool_calls,
        usage: state.usage,
    }
}

async fn drive<M: ChatModel>(
    model: &M,
    tools: &EpisodeTools,
    mut messages: Vec<ChatMessage>,
    max_steps: u32,
    state: &mut LoopState,
) -> LoopEnd {
    let specs = tool_specs();
    while state.steps < max_steps.max(1) {
        let request = ChatRequest::new(messages.clone()).with_tools(specs.clone());
        let response = match model.chat(&request).await {
            Ok(response) => response,
            Err(err) => return LoopEnd::ModelFailed(err),
        };
        state.steps += 1;
        state.usage.add(response.usage);
        tracing::debug!(
            step = state.steps,
            tool_calls = response.tool_calls.len(),
            from_content = response.tool_calls_from_content,
            "model replied"
        );
        if response.tool_calls.is_empty() {
            let text = response.content.as_deref().unwrap_or_default();
            return LoopEnd::Replied {
                summary: summary_from_text(text),
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
            let span = tracing::info_span!("execute_tool", tool = %call.name);
            match tools.call(call).instrument(span).await {
                ToolAction::Finish { summary } => {
                    return LoopEnd::Finished {
                        summary: summary_from_text(&summary),
                    }
                }
                ToolAction::Continue { result, ok } => {
                    tracing::debug!(tool = %call.name, ok, "tool ran");
                    messages.push(ChatMessage::tool_result(&call.id, &call.name, result));
                }
            }
        }
    }
    LoopEnd::StepCap
}

/// Tool results must answer a call id; fallback-parsed calls may come without one.
fn give_call_ids(message: &mut ChatMessage, seen: u32) {
    if let ChatMessage::Assistant { tool_calls, .. } = message {
        for (i, call) in tool_calls.iter_mut().enumerate() {
            if call.id.trim().is_empty() {
                call.id = format!("call_{}", seen as usize + i + 1);
            }
        }
    }
}

/// The model's text as a summary: tool-call blocks removed, trimmed, bounded.
pub fn summary_from_text(text: &str) -> String {
    let text = strip_tool_calls(text);
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    let mut summary: String = text.chars().take(MAX_SUMMARY_CHARS).collect();
    if text.chars().count() > MAX_SUMMARY_CHARS {
        summary.push('…');
    }
    summary
}

#[cfg(test)]
#[path = "tool_loop_tests.rs"]
mod tests;
