//! The provider-neutral client the binaries hold: one variant per provider.

use crate::anthropic_client::AnthropicClient;
use crate::chat_types::{ChatRequest, ChatResponse};
use crate::model_error::ModelError;
use crate::openai_client::OpenAiClient;
use crate::profile_config::{ModelProfile, Provider};
use crate::retry::RetryPolicy;

#[derive(Debug, Clone)]
pub enum ChatClient {
    OpenAi(OpenAiClient),
    Anthropic(AnthropicClient),
}

impl ChatClient {
    /// The client for the profile's provider.
    pub fn from_profile(profile: &ModelProfile) -> Result<Self, ModelError> {
        match profile.provider {
            Provider::OpenAi => Ok(ChatClient::OpenAi(OpenAiClient::new(profile.clone())?)),
            Provider::Anthropic => Ok(ChatClient::Anthropic(AnthropicClient::new(
                profile.clone(),
            )?)),
        }
    }

    pub fn with_retry_policy(self, retry: RetryPolicy) -> Self {
        match self {
            ChatClient::OpenAi(client) => ChatClient::OpenAi(client.with_retry_policy(retry)),
            ChatClient::Anthropic(client) => ChatClient::Anthropic(client.with_retry_policy(retry)),
        }
    }

    /// One call: retried on transient errors (honouring `Retry-After`), usage priced per the
    /// profile's price table.
    pub async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let started = std::time::Instant::now();
        let result = match self {
            ChatClient::OpenAi(client) => client.chat(req).await,
            ChatClient::Anthropic(client) => client.chat(req).await,
        };
        record_call_metrics(self.profile(), &result, started.elapsed().as_secs_f64());
        result
    }

    pub fn profile(&self) -> &ModelProfile {
        match self {
            ChatClient::OpenAi(client) => client.profile(),
            ChatClient::Anthropic(client) => client.profile(),
        }
    }
}

/// `gen_ai.client.token.usage` and `gen_ai.client.operation.duration` (GenAI semantic
/// conventions) on the process's OpenTelemetry meter provider.
fn record_call_metrics(
    profile: &ModelProfile,
    result: &Result<ChatResponse, ModelError>,
    seconds: f64,
) {
    use opentelemetry::KeyValue;
    let meter = opentelemetry::global::meter("loopgate");
    let mut attrs = vec![
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new("gen_ai.provider.name", profile.provider.as_str()),
        KeyValue::new("gen_ai.request.model", profile.model.clone()),
    ];
    match result {
        Ok(response) => {
            let tokens = meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Tokens used per model call, by token type")
                .with_boundaries(vec![
                    1.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0,
                ])
                .build();
            for (kind, n) in [
                ("input", response.usage.input_tokens),
                ("output", response.usage.output_tokens),
            ] {
                let mut with_type = attrs.clone();
                with_type.push(KeyValue::new("gen_ai.token.type", kind));
                tokens.record(n, &with_type);
            }
        }
        Err(e) => attrs.push(KeyValue::new(
            "error.type",
            format!("{:?}", e.kind()).to_lowercase(),
        )),
    }
    meter
        .f64_histogram("gen_ai.client.operation.duration")
        .with_unit("s")
        .with_description("Duration of model calls")
        .with_boundaries(vec![
            0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
            1800.0,
        ])
        .build()
        .record(seconds, &attrs);
}
