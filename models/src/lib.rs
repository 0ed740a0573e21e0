//! loopgate-models: LLM adapters. OpenAI-compatible chat completions today (with a fallback
//! for tool calls written into the content), model profiles from config, error classification.

pub mod chat_client;
pub mod chat_types;
pub mod model_error;
pub mod openai_client;
pub mod openai_wire;
pub mod profile_config;

pub use chat_client::ChatClient;
pub use chat_types::{ChatMessage, ChatRequest, ChatResponse, ToolCall, ToolSpec};
pub use model_error::{ModelError, ModelErrorKind};
pub use openai_client::{OpenAiClient, RetryPolicy};
pub use profile_config::{
    process_env, resolve_profile, resolve_profiles, ApiKey, ModelConfigError, ModelProfile,
    ModelProfileConfig, ModelProfiles, Provider,
};
