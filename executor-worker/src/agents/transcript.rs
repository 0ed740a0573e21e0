//! Reading a CLI agent's JSON-lines output as it streams: its final message, whether it says
//! it succeeded, token usage and cost when it reports them, turns and tool calls. Lines that
//! are not JSON (or not understood) are counted and skipped. Pure.
//!
//! Formats: Claude Code `--output-format stream-json` (`assistant` / `user` messages, a final
//! `result` with `is_error`, `usage`, `total_cost_usd`, `num_turns`); Codex `exec --json`
//! (`item.completed` items: `agent_message`, `command_execution`, `file_change`, ...;
//! `turn.completed` with `usage`; `turn.failed` / `error`; the older `{"msg": {...}}` shape is
//! read too); OpenCode `run --format json` (`text`, `tool_use`, `step_finish` with `tokens` and
//! `cost`, `error`).

use loopgate_protocol::usage::Usage;
use serde_json::Value;

use crate::agents::config::AgentKind;

/// What the agent's output said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AgentReport {
    /// Its last message to the user.
    pub final_message: Option<String>,
    /// `Some(false)` when the agent reported a failure, `Some(true)` an explicit success.
    pub success: Option<bool>,
    /// The error it failed with (a failure event: Claude's error result, Codex's
    /// `turn.failed`, an OpenCode `error`).
    pub error: Option<String>,
    /// The last non-fatal error message it printed (e.g. Codex's `error` events while it
    /// retries); used as the reason when the process fails without a failure event.
    pub warning: Option<String>,
    /// Summed over the run; `None` when it reported none.
    pub usage: Option<Usage>,
    pub turns: u32,
    pub tool_calls: u32,
    /// JSON lines understood.
    pub events: u64,
    /// Lines that were not JSON objects.
    pub other_lines: u64,
}

#[derive(Debug)]
pub(crate) struct TranscriptReader {
    kind: AgentKind,
    report: AgentReport,
    /// OpenCode: text of the current step.
    step_text: String,
    /// Claude: `result.usage` replaces what the messages summed.
    final_usage: Option<Usage>,
}

fn text_of(value: &Value, key: &str) -> Option<String> {
    value
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

fn count(value: &Value, key: &str) -> u64 {
    value.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// USD (a float) to micro-dollars.
fn usd_micros(value: Option<&Value>) -> u64 {
    match value.and_then(Value::as_f64) {
        Some(usd) if usd.is_finite() && usd > 0.0 => (usd * 1e6).round() as u64,
        _ => 0,
    }
}

impl TranscriptReader {
    pub(crate) fn new(kind: AgentKind) -> Self {
        TranscriptReader {
            kind,
            report: AgentReport::default(),
            step_text: String::new(),
            final_usage: None,
        }
    }

    /// One line of the agent's stdout.
    pub(crate) fn line(&mut self, line: &str) {
        let line = line.trim();
        if line.is_empty() {
            return;
        }
        let Ok(event @ Value::Object(_)) = serde_json::from_str::<Value>(line) else {
            self.report.other_lines += 1;
            return;
        };
        self.report.events += 1;
        match self.kind {
            AgentKind::ClaudeCode => self.claude(&event),
            AgentKind::Codex => self.codex(&event),
            AgentKind::OpenCode => self.opencode(&event),
        }
    }

    pub(crate) fn finish(mut self) -> AgentReport {
        if let Some(usage) = self.final_usage {
            self.report.usage = Some(usage);
        }
        // OpenCode: the text of a step that never finished (e.g. killed) is its last word.
        if !self.step_text.trim().is_empty() {
            self.report.final_message = Some(self.step_text.trim().to_string());
        }
        self.report
    }

    fn add_usage(&mut self, usage: Usage) {
        self.report
            .usage
            .get_or_insert_with(Usage::default)
            .add(usage);
    }

    fn claude(&mut self, event: &Value) {
        match event.get("type").and_then(Value::as_str) {
            Some("assistant") => {
                self.report.turns += 1;
                let blocks = event.pointer("/message/content").and_then(Value::as_array);
                let mut text = String::new();
                for block in blocks.into_iter().flatten() {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            text.push_str(block.get("text").and_then(Value::as_str).unwrap_or(""))
                        }
                        Some("tool_use") => self.report.tool_calls += 1,
                        _ => {}
                    }
                }
                if !text.trim().is_empty() {
                    self.report.final_message = Some(text.trim().to_string());
                }
            }
            Some("result") => {
                let is_error = event
                    .get("is_error")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
                    || event
                        .get("subtype")
                        .and_then(Value::as_str)
                        .is_some_and(|s| s != "success");
                self.report.success = Some(!is_error);
                if let Some(result) = text_of(event, "result") {
                    if is_error {
                        self.report.error = Some(result.clone());
                    }
                    self.report.final_message = Some(result);
                } else if is_error {
                    self.report.error = text_of(event, "subtype");
                }
                if let Some(turns) = event.get("num_turns").and_then(Value::as_u64) {
                    self.report.turns = u32::try_from(turns).unwrap_or(u32::MAX);
                }
                if let Some(usage) = event.get("usage") {
                    let input = count(usage, "input_tokens")
                        + count(usage, "cache_creation_input_tokens")
                        + count(usage, "cache_read_input_tokens");
                    self.final_usage = Some(Usage {
                        input_tokens: input,
                        output_tokens: count(usage, "output_tokens"),
                        cost_micros: usd_micros(event.get("total_cost_usd")),
                        cached_prompt_tokens: count(usage, "cache_read_input_tokens"),
                    });
                }
            }
            _ => {}
        }
    }

    fn codex(&mut self, event: &Value) {
        // The older format wraps each event as {"id": .., "msg": {"type": ..}}.
        if let Some(msg) = event.get("msg") {
            match msg.get("type").and_then(Value::as_str) {
                Some("agent_message") => self.report.final_message = text_of(msg, "message"),
                Some("task_complete") => {
                    self.report.turns += 1;
                    if let Some(last) = text_of(msg, "last_agent_message") {
                        self.report.final_message = Some(last);
                    }
                }
                Some("exec_command_begin") | Some("patch_apply_begin") => {
                    self.report.tool_calls += 1
                }
                Some("error") => self.report.warning = text_of(msg, "message"),
                _ => {}
            }
            return;
        }
        match event.get("type").and_then(Value::as_str) {
            Some("item.completed") => {
                let item = event.get("item").cloned().unwrap_or(Value::Null);
                let item_type = text_of(&item, "type").or_else(|| text_of(&item, "item_type"));
                match item_type.as_deref() {
                    Some("agent_message") | Some("assistant_message") => {
                        if let Some(text) = text_of(&item, "text") {
                            self.report.final_message = Some(text);
                        }
                    }
                    Some("command_execution")
                    | Some("file_change")
                    | Some("mcp_tool_call")
                    | Some("web_search") => self.report.tool_calls += 1,
                    Some("error") => self.report.warning = text_of(&item, "message"),
                    _ => {}
                }
            }
            Some("turn.completed") => {
                self.report.turns += 1;
                if self.report.success.is_none() {
                    self.report.success = Some(true);
                }
                if let Some(usage) = event.get("usage") {
                    self.add_usage(
                        Usage::tokens(count(usage, "input_tokens"), count(usage, "output_tokens"))
                            .with_cached(count(usage, "cached_input_tokens")),
                    );
                }
            }
            Some("turn.failed") => {
                self.report.success = Some(false);
                self.report.error = event.get("error").and_then(|e| text_of(e, "message"));
            }
            Some("error") => self.report.warning = text_of(event, "message"),
            _ => {}
        }
    }

    fn opencode(&mut self, event: &Value) {
        let part = event.get("part").cloned().unwrap_or(Value::Null);
        match event.get("type").and_then(Value::as_str) {
            Some("step_start") => self.step_text.clear(),
            Some("text") => {
                if let Some(text) = part.get("text").and_then(Value::as_str) {
                    self.step_text.push_str(text);
                }
            }
            Some("tool_use") => self.report.tool_calls += 1,
            Some("step_finish") => {
                self.report.turns += 1;
                if let Some(tokens) = part.get("tokens") {
                    let cache = tokens.get("cache").cloned().unwrap_or(Value::Null);
                    let input =
                        count(tokens, "input") + count(&cache, "read") + count(&cache, "write");
                    let output = count(tokens, "output") + count(tokens, "reasoning");
                    self.add_usage(Usage {
                        input_tokens: input,
                        output_tokens: output,
                        cost_micros: usd_micros(part.get("cost")),
                        cached_prompt_tokens: count(&cache, "read"),
                    });
                }
                if !self.step_text.trim().is_empty() {
                    self.report.final_message = Some(self.step_text.trim().to_string());
                }
                if part.get("reason").and_then(Value::as_str) != Some("tool-calls") {
                    self.report.success.get_or_insert(true);
                }
            }
            Some("error") => {
                let error = event.get("error").cloned().unwrap_or(Value::Null);
                self.report.error = text_of(&error, "message")
                    .or_else(|| error.get("data").and_then(|d| text_of(d, "message")))
                    .or_else(|| text_of(&error, "name"))
                    .or_else(|| Some(error.to_string()));
                self.report.success = Some(false);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "transcript_tests.rs"]
mod tests;
