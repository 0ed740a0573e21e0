//! Provider-neutral chat types the roles build prompts with and read replies from.

use crate::tool_call_recovery::strip_tool_calls;
use loopgate_protocol::usage::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        #[serde(default)]
        content: Option<String>,
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, answering the call with id `tool_call_id`. `images` (a
    /// browser screenshot) reach the model only when its profile has `vision = true`.
    Tool {
        tool_call_id: String,
        name: String,
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImagePart>,
    },
}

/// An image that goes with a tool result, base64-encoded.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImagePart {
    /// e.g. `image/png`.
    pub media_type: String,
    /// Standard base64 (with padding) of the image bytes.
    pub data_base64: String,
}

impl ImagePart {
    /// A PNG image from its bytes.
    pub fn png(bytes: &[u8]) -> Self {
        use base64::Engine;
        ImagePart {
            media_type: "image/png".to_string(),
            data_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }

    /// `data:<media_type>;base64,<data>` (OpenAI's `image_url.url`).
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type, self.data_base64)
    }
}

/// Without the data: a screenshot is tens of kilobytes of base64.
impl std::fmt::Debug for ImagePart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImagePart")
            .field("media_type", &self.media_type)
            .field("base64_len", &self.data_base64.len())
            .finish()
    }
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage::System {
            content: content.into(),
        }
    }
    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage::User {
            content: content.into(),
        }
    }
    pub fn assistant_text(content: impl Into<String>) -> Self {
        ChatMessage::Assistant {
            content: Some(content.into()),
            tool_calls: Vec::new(),
        }
    }
    pub fn tool_result(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        ChatMessage::Tool {
            tool_call_id: tool_call_id.into(),
            name: name.into(),
            content: content.into(),
            images: Vec::new(),
        }
    }
    /// A tool result with images (sent only to vision profiles; the text always).
    pub fn tool_result_with_images(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
        images: Vec<ImagePart>,
    ) -> Self {
        ChatMessage::Tool {
            tool_call_id: tool_call_id.into(),
            name: name.into(),
            content: content.into(),
            images,
        }
    }
}

/// A tool call the model asked for. `arguments` is the decoded JSON; when the model sent
/// arguments that are not JSON they are kept verbatim as `Value::String`, so the caller can
/// report the error back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
    /// The arguments as the model wrote them (a JSON string that decodes strictly), sent back
    /// verbatim in later requests (see [`ToolCall::arguments_text`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_arguments: Option<String>,
}

impl ToolCall {
    /// A call without the model's own text of its arguments.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
            raw_arguments: None,
        }
    }

    /// The arguments as a JSON string for the wire: the model's own text while it still
    /// decodes to `arguments` (so the prompt prefix a server cached stays byte-identical),
    /// else arguments that were not JSON verbatim, else `arguments` serialized.
    pub fn arguments_text(&self) -> Cow<'_, str> {
        if let Some(raw) = &self.raw_arguments {
            if serde_json::from_str::<Value>(raw).is_ok_and(|value| value == self.arguments) {
                return Cow::Borrowed(raw);
            }
        }
        match &self.arguments {
            Value::String(raw) => Cow::Borrowed(raw),
            other => Cow::Owned(other.to_string()),
        }
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: Value,
}

/// The JSON schema a request's reply should conform to. Sent to the server only when the
/// profile says `structured_output = "json_schema"`; the caller parses the reply either way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplySchema {
    /// A short identifier (OpenAI: `response_format.json_schema.name`, `[a-zA-Z0-9_-]{1,64}`).
    pub name: String,
    pub schema: Value,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Overrides the profile's `max_tokens`.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Overrides the profile's `temperature`.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// The sampling seed, where the API takes one (OpenAI-compatible servers: `seed`; the
    /// Anthropic adapter has none and leaves it out). `None`: the server's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The reply's schema, if the caller has one (see [`ReplySchema`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_schema: Option<ReplySchema>,
}

impl ChatRequest {
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        ChatRequest {
            messages,
            ..ChatRequest::default()
        }
    }
    pub fn with_tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.tools = tools;
        self
    }
    pub fn with_reply_schema(mut self, name: impl Into<String>, schema: Value) -> Self {
        self.reply_schema = Some(ReplySchema {
            name: name.into(),
            schema,
        });
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The assistant's text, verbatim (tool calls written into it are not removed; see
    /// `crate::tool_call_recovery::strip_tool_calls`).
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    /// True when `tool_calls` were recovered from `content` by the fallback parser.
    pub tool_calls_from_content: bool,
    pub finish_reason: Option<String>,
    /// As reported by the server; estimated as chars/4 when the server reports none.
    pub usage: Usage,
    /// The model that answered, as reported by the server (else the requested one).
    pub model: String,
}

impl ChatResponse {
    /// The assistant message to append to the conversation before the tool results. When the
    /// calls were recovered from the content, they are removed from the content so the history
    /// carries each call once, in the structured form.
    pub fn to_assistant_message(&self) -> ChatMessage {
        ChatMessage::Assistant {
            content: self.assistant_content(),
            tool_calls: self.tool_calls.clone(),
        }
    }

    /// The content of [`ChatResponse::to_assistant_message`]: without the calls written into
    /// it when they were recovered from it.
    pub(crate) fn assistant_content(&self) -> Option<String> {
        if self.tool_calls_from_content {
            self.content
                .as_deref()
                .map(strip_tool_calls)
                .filter(|text| !text.trim().is_empty())
        } else {
            self.content.clone()
        }
    }
}
