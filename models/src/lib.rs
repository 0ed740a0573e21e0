//! loopgate-models: LLM adapters behind one narrow type, [`ChatClient`]: OpenAI-compatible chat
//! completions (with a fallback for tool calls written into the content) and the Anthropic
//! Messages API, each whole or streamed; model profiles from config (with prices); error
//! classification; retries with backoff, jitter and `Retry-After`.

mod anthropic_stream;
mod call_policy;
mod http_send;
mod openai_stream;
mod response_draft;
mod sse;

pub mod anthropic_client;
pub mod anthropic_wire;
pub mod chat_client;
pub mod chat_types;
pub mod model_error;
pub mod openai_client;
pub mod openai_wire;
pub mod pricing;
pub mod profile_config;
pub mod retry;
pub mod tool_call_recovery;

pub use anthropic_client::AnthropicClient;
pub use chat_client::ChatClient;
pub use chat_types::{
    ChatMessage, ChatRequest, ChatResponse, ImagePart, ReplySchema, ToolCall, ToolSpec,
};
pub use model_error::{ModelError, ModelErrorKind};
pub use openai_client::OpenAiClient;
pub use pricing::Price;
pub use profile_config::{
    process_env, resolve_profile, resolve_profiles, ApiKey, ModelConfigError, ModelProfile,
    ModelProfileConfig, ModelProfiles, Provider, StructuredOutput,
};
pub use retry::RetryPolicy;
