//! What every tool's file defines and shares: its [`ToolDef`] (name, description, argument
//! schema, what it does to the workspace), what a call does to the loop ([`ToolAction`]), the
//! lenient argument parsing and the schema pieces.

use loopgate_models::{ImagePart, ToolSpec};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::tools::workspace::ToolError;

/// One tool as its file defines it.
#[derive(Debug)]
pub(crate) struct ToolDef {
    pub(crate) name: &'static str,
    /// What the model reads about it.
    pub(crate) description: &'static str,
    /// The JSON schema of its arguments.
    pub(crate) parameters: fn() -> Value,
    pub(crate) effect: ToolEffect,
}

impl ToolDef {
    /// The tool as offered to the model.
    pub(crate) fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.to_string(),
            description: self.description.to_string(),
            parameters: (self.parameters)(),
        }
    }
}

/// What a tool does to the workspace (or the page), as the loop's guards need to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolEffect {
    /// Changes nothing.
    ReadOnly,
    /// Writes a whole file with the text of argument `text`: the same call again writes the
    /// same bytes.
    WritesFile { text: &'static str },
    /// Changes part of a file to the text of argument `text`.
    EditsFile { text: &'static str },
    /// May change the workspace or the page in another way.
    Acts,
    /// Ends the episode.
    Ends,
}

impl ToolEffect {
    /// The argument that holds the text the tool writes into a file.
    pub(crate) fn written_text(self) -> Option<&'static str> {
        match self {
            ToolEffect::WritesFile { text } | ToolEffect::EditsFile { text } => Some(text),
            ToolEffect::ReadOnly | ToolEffect::Acts | ToolEffect::Ends => None,
        }
    }
}

/// What the loop does after a tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolAction {
    /// Give this text back to the model as the tool result and go on; `images` (a
    /// `browser_screenshot`'s PNG) go with it to vision models.
    Continue {
        result: String,
        ok: bool,
        images: Vec<ImagePart>,
    },
    /// The agent called `finish`.
    Finish { summary: String },
}

impl ToolAction {
    /// A tool's text result, or its error as the text `error: ...`.
    pub(crate) fn from_text<E: std::fmt::Display>(done: Result<String, E>) -> ToolAction {
        match done {
            Ok(result) => ToolAction::Continue {
                result,
                ok: true,
                images: Vec::new(),
            },
            Err(err) => ToolAction::Continue {
                result: format!("error: {err}"),
                ok: false,
                images: Vec::new(),
            },
        }
    }
}

/// A call's arguments as a JSON value: arguments the adapter could not decode arrive verbatim
/// as a string (some models double-encode), none are `{}`.
pub(crate) fn arguments_value(tool: &str, arguments: &Value) -> Result<Value, ToolError> {
    match arguments {
        Value::String(text) => serde_json::from_str::<Value>(text)
            .map_err(|_| bad_arguments(tool, format!("arguments are not a JSON object: {text}"))),
        Value::Null => Ok(json!({})),
        other => Ok(other.clone()),
    }
}

/// A tool's arguments into its (lenient) argument struct.
pub(crate) fn parse_args<T: DeserializeOwned>(
    tool: &str,
    arguments: &Value,
) -> Result<T, ToolError> {
    let value = arguments_value(tool, arguments)?;
    from_value(tool, value)
}

/// An arguments value into a tool's argument struct.
pub(crate) fn from_value<T: DeserializeOwned>(tool: &str, value: Value) -> Result<T, ToolError> {
    serde_json::from_value(value).map_err(|err| bad_arguments(tool, err.to_string()))
}

fn bad_arguments(tool: &str, reason: String) -> ToolError {
    ToolError::BadArguments {
        tool: tool.to_string(),
        reason,
    }
}

/// `{"type": "string", "description": ...}`.
pub(crate) fn string_param(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

/// A workspace path argument.
pub(crate) fn path_param() -> Value {
    string_param("Path relative to the workspace root")
}

/// An object with these properties, `required` ones named.
pub(crate) fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}
