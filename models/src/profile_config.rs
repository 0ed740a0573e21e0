//! Model profiles: the `[models.<name>]` config tables and their resolution (API key read once,
//! values validated) into a [`ModelProfile`] the clients are built from.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::pricing::Price;

/// Which wire protocol a profile speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// OpenAI-compatible chat completions (OpenAI, llama.cpp `llama-server`, vLLM, Ollama, ...).
    #[default]
    OpenAi,
    /// Anthropic Messages API (`POST {base_url}/messages`, e.g. `https://api.anthropic.com/v1`).
    Anthropic,
}

impl Provider {
    /// The `gen_ai.provider.name` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a request that declares a reply schema asks the server to constrain its reply to it
/// (`structured_output` in a profile). Only the manager's decision request declares one today.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StructuredOutput {
    /// Nothing is sent; the reply is parsed defensively as always.
    #[default]
    Off,
    /// OpenAI-compatible `response_format: {"type": "json_schema", ...}` (OpenAI, vLLM,
    /// llama.cpp's llama-server); only for `provider = "openai"`.
    JsonSchema,
}

impl StructuredOutput {
    pub fn as_str(self) -> &'static str {
        match self {
            StructuredOutput::Off => "off",
            StructuredOutput::JsonSchema => "json_schema",
        }
    }
}

/// By hand, so that every error (an unknown word, a value that is not a string) names the key.
impl<'de> Deserialize<'de> for StructuredOutput {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Word;
        impl serde::de::Visitor<'_> for Word {
            type Value = StructuredOutput;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"`structured_output` = "json_schema" or "off""#)
            }
            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Self::Value, E> {
                match value {
                    "off" => Ok(StructuredOutput::Off),
                    "json_schema" => Ok(StructuredOutput::JsonSchema),
                    other => Err(E::custom(format_args!(
                        r#"unknown `structured_output` value `{other}`: expected "json_schema" or "off""#
                    ))),
                }
            }
        }
        deserializer.deserialize_str(Word)
    }
}

pub const DEFAULT_TIMEOUT_SECS: u64 = 300;

fn default_timeout_secs() -> u64 {
    DEFAULT_TIMEOUT_SECS
}

/// One model profile as written in the config file. Holds no secret: only where to find it.
/// `Default` gives empty `base_url` / `model` (not valid on their own): use it as
/// `ModelProfileConfig { base_url, model, ..Default::default() }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelProfileConfig {
    #[serde(default)]
    pub provider: Provider,
    /// e.g. `http://127.0.0.1:8080/v1` or `https://api.openai.com/v1`.
    pub base_url: String,
    pub model: String,
    /// Name of the environment variable holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// File whose (trimmed) content is the API key.
    #[serde(default)]
    pub api_key_file: Option<PathBuf>,
    /// Per-request timeout.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f32>,
    /// The model's context window in tokens (for context-health accounting).
    #[serde(default)]
    pub context_window: Option<u32>,
    /// Ask for a streamed response (SSE) and assemble it; same result as unstreamed.
    #[serde(default)]
    pub stream: bool,
    /// Price of a million input tokens in USD (for `Usage::cost_micros`).
    #[serde(default)]
    pub input_usd_per_mtok: Option<f64>,
    /// Price of a million output tokens in USD.
    #[serde(default)]
    pub output_usd_per_mtok: Option<f64>,
    /// Constrain replies to the schema a request declares (`"json_schema"`), or not (`"off"`).
    #[serde(default)]
    pub structured_output: StructuredOutput,
    /// The model reads images: tool results that come with one (a `browser_screenshot`) carry
    /// it as an image part (OpenAI `image_url` data URL, Anthropic `image` block). Off: text only.
    #[serde(default)]
    pub vision: bool,
    /// More top-level fields for every request body, as sent (a server's own sampling options:
    /// llama.cpp's `repeat_penalty` or `dry_multiplier`, vLLM's `top_k` or
    /// `chat_template_kwargs`). A field loopgate sets itself (`model`, `messages`, `tools`,
    /// `max_tokens`, `temperature`, `stream`, ...) is refused: use the profile's own key.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra_body: serde_json::Map<String, serde_json::Value>,
}

/// The request fields the wire encoders set themselves, which `extra_body` may not name.
pub(crate) fn reserved_body_fields(provider: Provider) -> &'static [&'static str] {
    match provider {
        Provider::OpenAi => &[
            "model",
            "messages",
            "tools",
            "max_tokens",
            "temperature",
            "seed",
            "stream",
            "stream_options",
            "response_format",
        ],
        Provider::Anthropic => &[
            "model",
            "messages",
            "system",
            "tools",
            "max_tokens",
            "temperature",
            "stream",
        ],
    }
}

impl Default for ModelProfileConfig {
    fn default() -> Self {
        ModelProfileConfig {
            provider: Provider::default(),
            base_url: String::new(),
            model: String::new(),
            api_key_env: None,
            api_key_file: None,
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            max_tokens: None,
            temperature: None,
            context_window: None,
            stream: false,
            input_usd_per_mtok: None,
            output_usd_per_mtok: None,
            structured_output: StructuredOutput::Off,
            vision: false,
            extra_body: serde_json::Map::new(),
        }
    }
}

/// Model profiles by name, as in the config file.
pub type ModelProfiles = BTreeMap<String, ModelProfileConfig>;

/// An API key. `Debug` redacts it and there is no `Display`; read it with [`ApiKey::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// A validated profile with its key read. `Debug` redacts the key.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelProfile {
    /// The profile's name in the config (e.g. `manager`, `local-qwen`).
    pub name: String,
    pub provider: Provider,
    /// Without a trailing `/`.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<ApiKey>,
    pub timeout: Duration,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub context_window: Option<u32>,
    pub stream: bool,
    /// `None` when the config names no price: costs are then reported as 0.
    pub price: Option<Price>,
    /// Whether a request's reply schema is sent to the server (never for Anthropic).
    pub structured_output: StructuredOutput,
    /// Whether images attached to tool results are sent (else only their text).
    pub vision: bool,
    /// More top-level request fields (none of [`reserved_body_fields`]).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelConfigError {
    #[error("model profile `{profile}`: provider `{provider}` is not supported yet")]
    UnsupportedProvider { profile: String, provider: Provider },
    #[error("model profile `{profile}`: invalid `{field}`: {reason}")]
    InvalidField {
        profile: String,
        field: &'static str,
        reason: String,
    },
    #[error("model profile `{profile}`: set only one of `api_key_env` and `api_key_file`")]
    ConflictingKeySources { profile: String },
    #[error("model profile `{profile}`: API key environment variable `{var}` is unset or empty")]
    MissingKeyEnv { profile: String, var: String },
    #[error("model profile `{profile}`: API key file {path:?} is empty")]
    EmptyKeyFile { profile: String, path: PathBuf },
    #[error("model profile `{profile}`: cannot read API key file {path:?}: {source}")]
    KeyFileUnreadable {
        profile: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no model profile named `{0}`")]
    UnknownProfile(String),
}

/// Environment lookup for [`ModelProfileConfig::resolve`] backed by the process environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl ModelProfileConfig {
    /// Validates the profile and reads its API key (once). `env` looks up environment
    /// variables; binaries pass [`process_env`].
    pub fn resolve(
        &self,
        name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ModelProfile, ModelConfigError> {
        let invalid = |field: &'static str, reason: &str| ModelConfigError::InvalidField {
            profile: name.to_string(),
            field,
            reason: reason.to_string(),
        };
        let base_url = self.base_url.trim().trim_end_matches('/').to_string();
        let host = base_url
            .strip_prefix("http://")
            .or_else(|| base_url.strip_prefix("https://"));
        if host.is_none_or(|h| h.is_empty() || h.starts_with('/')) {
            return Err(invalid(
                "base_url",
                "must be an http:// or https:// URL with a host",
            ));
        }
        let model = self.model.trim().to_string();
        if model.is_empty() {
            return Err(invalid("model", "must not be empty"));
        }
        if self.timeout_secs == 0 {
            return Err(invalid("timeout_secs", "must be at least 1"));
        }
        if let Some(t) = self.temperature {
            if !t.is_finite() || t < 0.0 {
                return Err(invalid("temperature", "must be a finite number >= 0"));
            }
        }
        if self.max_tokens == Some(0) {
            return Err(invalid("max_tokens", "must be at least 1"));
        }
        if self.context_window == Some(0) {
            return Err(invalid("context_window", "must be at least 1"));
        }
        for (field, value) in [
            ("input_usd_per_mtok", self.input_usd_per_mtok),
            ("output_usd_per_mtok", self.output_usd_per_mtok),
        ] {
            if value.is_some_and(|v| !v.is_finite() || v < 0.0) {
                return Err(invalid(field, "must be a finite number >= 0"));
            }
        }
        if let Some(error) = structured_output_refused(name, self.provider, self.structured_output)
        {
            return Err(error);
        }
        let reserved = reserved_body_fields(self.provider);
        if let Some(key) = self
            .extra_body
            .keys()
            .find(|k| reserved.contains(&k.as_str()))
        {
            return Err(invalid(
                "extra_body",
                &format!(
                    "`{key}` is set by loopgate itself (fields it sets: {}); use the profile's own key where there is one",
                    reserved.join(", ")
                ),
            ));
        }
        let price =
            (self.input_usd_per_mtok.is_some() || self.output_usd_per_mtok.is_some()).then(|| {
                Price {
                    input_usd_per_mtok: self.input_usd_per_mtok.unwrap_or(0.0),
                    output_usd_per_mtok: self.output_usd_per_mtok.unwrap_or(0.0),
                }
            });
        let api_key = self.read_api_key(name, env)?;
        Ok(ModelProfile {
            name: name.to_string(),
            provider: self.provider,
            base_url,
            model,
            api_key,
            timeout: Duration::from_secs(self.timeout_secs),
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            context_window: self.context_window,
            stream: self.stream,
            price,
            structured_output: self.structured_output,
            vision: self.vision,
            extra_body: self.extra_body.clone(),
        })
    }

    fn read_api_key(
        &self,
        name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<ApiKey>, ModelConfigError> {
        match (&self.api_key_env, &self.api_key_file) {
            (Some(_), Some(_)) => Err(ModelConfigError::ConflictingKeySources {
                profile: name.to_string(),
            }),
            (Some(var), None) => match env(var).map(|k| k.trim().to_string()) {
                Some(key) if !key.is_empty() => Ok(Some(ApiKey(key))),
                _ => Err(ModelConfigError::MissingKeyEnv {
                    profile: name.to_string(),
                    var: var.clone(),
                }),
            },
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path).map_err(|source| {
                    ModelConfigError::KeyFileUnreadable {
                        profile: name.to_string(),
                        path: path.clone(),
                        source,
                    }
                })?;
                let key = text.trim();
                if key.is_empty() {
                    return Err(ModelConfigError::EmptyKeyFile {
                        profile: name.to_string(),
                        path: path.clone(),
                    });
                }
                Ok(Some(ApiKey(key.to_string())))
            }
            (None, None) => Ok(None),
        }
    }
}

/// Structured output is implemented for the OpenAI-compatible API only: an Anthropic profile
/// that asks for it is refused (at config load, and by the Anthropic client).
pub(crate) fn structured_output_refused(
    profile: &str,
    provider: Provider,
    structured_output: StructuredOutput,
) -> Option<ModelConfigError> {
    (provider != Provider::OpenAi && structured_output != StructuredOutput::Off).then(|| {
        ModelConfigError::InvalidField {
            profile: profile.to_string(),
            field: "structured_output",
            reason: format!(
                "`{}` is only supported for provider = \"openai\" (this profile is `{provider}`)",
                structured_output.as_str()
            ),
        }
    })
}

/// Resolves every profile in the map; the first error wins.
pub fn resolve_profiles(
    profiles: &ModelProfiles,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, ModelProfile>, ModelConfigError> {
    profiles
        .iter()
        .map(|(name, config)| Ok((name.clone(), config.resolve(name, env)?)))
        .collect()
}

/// Resolves just the named profile (a binary resolves only the profiles its roles use).
pub fn resolve_profile(
    profiles: &ModelProfiles,
    name: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ModelProfile, ModelConfigError> {
    profiles
        .get(name)
        .ok_or_else(|| ModelConfigError::UnknownProfile(name.to_string()))?
        .resolve(name, env)
}

#[cfg(test)]
mod tests;
