//! What an episode shows while it runs and leaves behind: its progress (turn, the tool being
//! called, tokens, tool calls; published throttled by [`progress::publish_progress`]) and its
//! transcript (model turns, tool calls with their arguments and results, self-check refusals,
//! a CLI agent's output), every text redacted with the worker's known secrets
//! (`loopgate_common::redact::redact_text`) and bounded (`loopgate_protocol::transcript`).
//! The tool loop holds an [`Observer`]; the default one observes nothing.

pub(crate) mod progress;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use loopgate_common::redact::redact_text;
use loopgate_protocol::transcript::{Transcript, TranscriptEntry};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Where a running episode stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProgressNow {
    pub(crate) turn: u32,
    pub(crate) tool: Option<String>,
    pub(crate) tool_calls: u32,
    pub(crate) tokens: u64,
}

#[derive(Debug)]
struct Observed {
    started: Instant,
    secrets: Arc<Vec<String>>,
    transcript: Transcript,
    now: ProgressNow,
    progress: Option<watch::Sender<ProgressNow>>,
    /// Cancelled once the agent's work is done (see [`Observer::agent_done`]).
    agent_done: Option<CancellationToken>,
}

/// A handle on one episode's observations (cheap to clone; all clones see the same).
#[derive(Debug, Clone, Default)]
pub(crate) struct Observer(Option<Arc<Mutex<Observed>>>);

impl Observer {
    /// Observe an episode whose transcript starts as `transcript` (its header), redacting
    /// `secrets`; progress goes to `progress` when given.
    pub(crate) fn new(
        transcript: Transcript,
        secrets: Arc<Vec<String>>,
        progress: Option<watch::Sender<ProgressNow>>,
    ) -> Self {
        Observer(Some(Arc::new(Mutex::new(Observed {
            started: Instant::now(),
            secrets,
            transcript,
            now: ProgressNow::default(),
            progress,
            agent_done: None,
        }))))
    }

    /// Cancel `token` when the agent's work is done ([`Observer::agent_done`]).
    pub(crate) fn on_agent_done(self, token: CancellationToken) -> Self {
        self.with(|o| o.agent_done = Some(token));
        self
    }

    /// The agent's work is done: no more model calls or tool runs, only freezing the
    /// workspace and storing the outcome are left.
    pub(crate) fn agent_done(&self) {
        self.with(|o| {
            if let Some(token) = &o.agent_done {
                token.cancel();
            }
        });
    }

    fn with(&self, f: impl FnOnce(&mut Observed)) {
        if let Some(inner) = &self.0 {
            if let Ok(mut observed) = inner.lock() {
                f(&mut observed);
            }
        }
    }

    /// The model is asked for turn `turn`.
    pub(crate) fn awaiting_model(&self, turn: u32) {
        self.with(|o| {
            o.now.turn = turn;
            o.now.tool = None;
            o.report();
        });
    }

    /// The model's reply of turn `turn`: its text, the turn's tokens and the episode's so far.
    pub(crate) fn model_turn(&self, turn: u32, text: &str, tokens: u64, total_tokens: u64) {
        self.with(|o| {
            o.now.turn = turn;
            o.now.tokens = total_tokens;
            let text = o.redact(text);
            let at_ms = o.at_ms();
            o.transcript.push(TranscriptEntry::ModelTurn {
                at_ms,
                turn,
                text,
                tokens,
            });
            o.report();
        });
    }

    /// The agent calls `tool` with `arguments`.
    pub(crate) fn tool_call(&self, tool: &str, arguments: &str) {
        self.with(|o| {
            o.now.tool = Some(tool.to_string());
            o.now.tool_calls = o.now.tool_calls.saturating_add(1);
            let (at_ms, turn) = (o.at_ms(), o.now.turn);
            let arguments = o.redact(arguments);
            o.transcript.push(TranscriptEntry::ToolCall {
                at_ms,
                turn,
                tool: tool.to_string(),
                arguments,
            });
            o.report();
        });
    }

    /// What the call of `tool` gave the agent.
    pub(crate) fn tool_result(&self, tool: &str, ok: bool, result: &str) {
        self.with(|o| {
            let (at_ms, turn) = (o.at_ms(), o.now.turn);
            let result = o.redact(result);
            o.transcript.push(TranscriptEntry::ToolResult {
                at_ms,
                turn,
                tool: tool.to_string(),
                ok,
                result,
            });
        });
    }

    /// A self-check refused `finish` with `text`.
    pub(crate) fn refusal(&self, text: &str) {
        self.with(|o| {
            let (at_ms, turn) = (o.at_ms(), o.now.turn);
            let text = o.redact(text);
            o.transcript
                .push(TranscriptEntry::SelfCheckRefusal { at_ms, turn, text });
        });
    }

    /// What a CLI agent printed.
    pub(crate) fn output(&self, text: &str) {
        self.with(|o| {
            let at_ms = o.at_ms();
            let text = o.redact(text);
            o.transcript.push(TranscriptEntry::Output { at_ms, text });
        });
    }

    /// `text` with the worker's known secrets redacted (the default observer knows none; URLs
    /// lose their credentials either way).
    pub(crate) fn redact(&self, text: &str) -> String {
        match &self.0 {
            Some(inner) => inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .redact(text),
            None => redact_text(text, &[]),
        }
    }

    /// The transcript so far (`None` for the default observer).
    pub(crate) fn transcript(&self) -> Option<Transcript> {
        let inner = self.0.as_ref()?;
        inner.lock().ok().map(|o| o.transcript.clone())
    }
}

impl Observed {
    fn at_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn redact(&self, text: &str) -> String {
        let secrets: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        redact_text(text, &secrets)
    }

    fn report(&self) {
        if let Some(tx) = &self.progress {
            tx.send_replace(self.now.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Every text is redacted; progress follows the turn, the tool and the tokens.
    #[test]
    fn observes_redacted_and_reports_progress() {
        let (tx, rx) = watch::channel(ProgressNow::default());
        let secret = "sk-test-SECRET-123456".to_string();
        let o = Observer::new(
            Transcript::default(),
            Arc::new(vec![secret.clone()]),
            Some(tx),
        );
        o.awaiting_model(1);
        o.model_turn(1, &format!("I will use {secret}"), 50, 50);
        o.tool_call("shell", &format!("{{\"command\":\"echo {secret}\"}}"));
        assert_eq!(
            *rx.borrow(),
            ProgressNow {
                turn: 1,
                tool: Some("shell".into()),
                tool_calls: 1,
                tokens: 50
            }
        );
        o.tool_result("shell", true, &format!("{secret}\n"));
        o.refusal("check 'a' fails");
        o.output("done");
        let t = o.transcript().unwrap();
        assert_eq!(t.entries.len(), 5);
        let json = serde_json::to_string(&t).unwrap();
        assert!(!json.contains(&secret), "{json}");
        assert!(json.contains("***"), "{json}");
        assert!(Observer::default().transcript().is_none());
        let done = CancellationToken::new();
        let o = o.on_agent_done(done.clone());
        assert!(!done.is_cancelled());
        o.agent_done();
        assert!(done.is_cancelled());
        Observer::default().agent_done();
    }
}
