//! What an executor episode did, turn by turn: its transcript, stored as JSON in the evidence
//! bucket (`lg-evidence`) by digest, named by the round's `ExecResult::transcript`, served by
//! `GET /v1/runs/{id}/rounds/{n}/transcript`. Written redacted and bounded by the executor
//! ([`MAX_TRANSCRIPT_BYTES`] in all, each text at most [`MAX_ENTRY_CHARS`]).

use serde::{Deserialize, Serialize};

/// The most a stored transcript holds (its texts, about); entries past it are counted in
/// `omitted`, not kept.
pub const MAX_TRANSCRIPT_BYTES: usize = 256 * 1024;
/// The most one text of an entry (a reply, arguments, a result) keeps, in characters.
pub const MAX_ENTRY_CHARS: usize = 4_000;

/// One episode's transcript.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Transcript {
    pub run_id: String,
    pub generation: u32,
    pub round: u32,
    /// The sibling of the step (1: the first).
    #[serde(default)]
    pub attempt: u32,
    pub worker: String,
    /// The executor profile that ran: a model profile (the built-in tool loop) or a CLI agent.
    #[serde(default)]
    pub profile: String,
    pub entries: Vec<TranscriptEntry>,
    /// Entries left out once the transcript reached its size bound.
    #[serde(default)]
    pub omitted: u32,
}

/// One thing that happened in the episode; `at_ms` is milliseconds since it started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TranscriptEntry {
    /// The model's reply of a turn (its text; its calls follow as `tool_call`s).
    ModelTurn {
        at_ms: u64,
        turn: u32,
        text: String,
        /// Tokens of this turn, input plus output.
        tokens: u64,
    },
    ToolCall {
        at_ms: u64,
        turn: u32,
        tool: String,
        /// The arguments as the model wrote them (JSON text).
        arguments: String,
    },
    ToolResult {
        at_ms: u64,
        turn: u32,
        tool: String,
        ok: bool,
        result: String,
    },
    /// A self-check refused `finish`: the findings the agent was given.
    SelfCheckRefusal { at_ms: u64, turn: u32, text: String },
    /// What a CLI agent printed (its captured output).
    Output { at_ms: u64, text: String },
}

impl TranscriptEntry {
    /// Its texts, for bounding.
    fn texts_mut(&mut self) -> Vec<&mut String> {
        match self {
            TranscriptEntry::ModelTurn { text, .. }
            | TranscriptEntry::SelfCheckRefusal { text, .. }
            | TranscriptEntry::Output { text, .. } => vec![text],
            TranscriptEntry::ToolCall {
                tool, arguments, ..
            } => vec![tool, arguments],
            TranscriptEntry::ToolResult { tool, result, .. } => vec![tool, result],
        }
    }

    /// About how many bytes it takes in the stored JSON.
    fn weight(&mut self) -> usize {
        64 + self.texts_mut().iter().map(|t| t.len()).sum::<usize>()
    }
}

/// `text` cut to at most `max` characters, with a note of how many were cut.
pub fn bounded_text(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept}… [{} more characters]", total - max)
}

impl Transcript {
    /// Append `entry` with each of its texts cut to [`MAX_ENTRY_CHARS`]; past
    /// [`MAX_TRANSCRIPT_BYTES`] it is only counted in `omitted`.
    pub fn push(&mut self, mut entry: TranscriptEntry) {
        for text in entry.texts_mut() {
            if text.chars().count() > MAX_ENTRY_CHARS {
                *text = bounded_text(text, MAX_ENTRY_CHARS);
            }
        }
        let used: usize = self.entries.iter_mut().map(TranscriptEntry::weight).sum();
        if used + entry.weight() > MAX_TRANSCRIPT_BYTES {
            self.omitted = self.omitted.saturating_add(1);
            return;
        }
        self.entries.push(entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_cut_with_a_note() {
        let cases = [
            ("short", 10, "short"),
            ("abcdef", 3, "abc… [3 more characters]"),
            ("ééé", 2, "éé… [1 more characters]"),
        ];
        for (text, max, want) in cases {
            assert_eq!(bounded_text(text, max), want, "{text}");
        }
    }

    #[test]
    fn a_transcript_stays_within_its_bound() {
        let mut t = Transcript::default();
        let big = "x".repeat(MAX_ENTRY_CHARS * 3);
        for turn in 0..200 {
            t.push(TranscriptEntry::ToolResult {
                at_ms: 0,
                turn,
                tool: "shell".into(),
                ok: true,
                result: big.clone(),
            });
        }
        let json = serde_json::to_vec(&t).unwrap();
        assert!(json.len() <= MAX_TRANSCRIPT_BYTES + 1024, "{}", json.len());
        assert!(t.omitted > 0);
        assert_eq!(t.entries.len() + t.omitted as usize, 200);
        let TranscriptEntry::ToolResult { result, .. } = &t.entries[0] else {
            panic!("not a result");
        };
        assert!(result.ends_with("more characters]"), "{result}");
    }
}
