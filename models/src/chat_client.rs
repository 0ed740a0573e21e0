//! The provider-neutral client the binaries hold: one variant per provider.

use crate::chat_types::{ChatRequest, ChatResponse};
use crate::model_error::ModelError;
use crate::openai_client::{OpenAiClient, RetryPolicy};
use crate::profile_config::{ModelConfigError, ModelProfile, Provider};

#[derive(Debug, Clone)]
pub enum ChatClient {
    OpenAi(OpenAiClient),
}

impl ChatClient {
    /// The client for the profile's provider; `Config(UnsupportedProvider)` for providers not
    /// implemented yet.
    pub fn from_profile(profile: &ModelProfile) -> Result<Self, ModelError> {
        match profile.provider {
            Provider::OpenAi => Ok(ChatClient::OpenAi(OpenAiClient::new(profile.clone())?)),
            Provider::Anthropic => Err(ModelError::Config(ModelConfigError::UnsupportedProvider {
                profile: profile.name.clone(),
                provider: profile.provider,
            })),
        }
    }

    pub fn with_retry_policy(self, retry: RetryPolicy) -> Self {
        match self {
            ChatClient::OpenAi(client) => ChatClient::OpenAi(client.with_retry_policy(retry)),
        }
    }

    pub async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, ModelError> {
        match self {
            ChatClient::OpenAi(client) => client.chat(req).await,
        }
    }

    pub fn profile(&self) -> &ModelProfile {
        match self {
            ChatClient::OpenAi(client) => client.profile(),
        }
    }
}
