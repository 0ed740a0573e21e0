//! HTTP client for OpenAI-compatible chat completions (`POST {base_url}/chat/completions`).

use std::time::Duration;

use reqwest::header::CONTENT_TYPE;
use tracing::field::Empty;
use tracing::Instrument;

use crate::chat_types::{ChatRequest, ChatResponse};
use crate::model_error::{ModelError, ModelErrorKind};
use crate::openai_wire::{parse_response, wire_request};
use crate::profile_config::{ModelConfigError, ModelProfile, Provider};

/// Retries of one `chat` call on transient errors (transport failures, 408, 429, 5xx).
/// Timeouts are not retried: the profile's timeout already bounds a slow model, and a retry
/// would multiply the wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_retries: u32,
    /// Waited before the first retry; doubled for each further one.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    pub fn no_retries() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry).unwrap_or(u32::MAX);
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// Connecting may take at most this long (or the whole timeout, if shorter).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct OpenAiClient {
    profile: ModelProfile,
    endpoint: String,
    http: reqwest::Client,
    retry: RetryPolicy,
}

impl OpenAiClient {
    /// A client for an `openai` profile. Each HTTP attempt is bounded by `profile.timeout`.
    pub fn new(profile: ModelProfile) -> Result<Self, ModelError> {
        if profile.provider != Provider::OpenAi {
            return Err(ModelError::Config(ModelConfigError::UnsupportedProvider {
                profile: profile.name.clone(),
                provider: profile.provider,
            }));
        }
        let http = reqwest::Client::builder()
            .timeout(profile.timeout)
            .connect_timeout(CONNECT_TIMEOUT.min(profile.timeout))
            .build()
            .map_err(|source| ModelError::Transport { source })?;
        Ok(OpenAiClient {
            endpoint: format!(
                "{}/chat/completions",
                profile.base_url.trim_end_matches('/')
            ),
            profile,
            http,
            retry: RetryPolicy::default(),
        })
    }

    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    pub fn profile(&self) -> &ModelProfile {
        &self.profile
    }

    /// One chat completion (non-streaming), retried per the [`RetryPolicy`].
    pub async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let span = tracing::info_span!(
            "chat",
            otel.name = %format!("chat {}", self.profile.model),
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = self.profile.provider.as_str(),
            gen_ai.request.model = %self.profile.model,
            gen_ai.response.model = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            loopgate.model_profile = %self.profile.name,
            loopgate.tool_calls_from_content = Empty,
            error.type = Empty,
        );
        let result = self.chat_with_retries(req).instrument(span.clone()).await;
        match &result {
            Ok(response) => {
                span.record("gen_ai.response.model", response.model.as_str());
                span.record("gen_ai.usage.input_tokens", response.usage.input_tokens);
                span.record("gen_ai.usage.output_tokens", response.usage.output_tokens);
                span.record(
                    "loopgate.tool_calls_from_content",
                    response.tool_calls_from_content,
                );
            }
            Err(error) => {
                span.record("error.type", format!("{:?}", error.kind()).as_str());
            }
        }
        result
    }

    async fn chat_with_retries(&self, req: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let body = serde_json::to_string(&wire_request(&self.profile, req))
            .map_err(|e| ModelError::InvalidRequest(e.to_string()))?;
        let mut retry = 0;
        loop {
            match self.send_once(&body).await {
                Ok(response) => return Ok(response),
                Err(error) if retry < self.retry.max_retries && should_retry(&error) => {
                    let wait = self.retry.backoff(retry);
                    tracing::warn!(
                        error = %error,
                        retry = retry + 1,
                        wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                        "transient model error; retrying"
                    );
                    tokio::time::sleep(wait).await;
                    retry += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }

    async fn send_once(&self, body: &str) -> Result<ChatResponse, ModelError> {
        let mut request = self
            .http
            .post(&self.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        if let Some(key) = &self.profile.api_key {
            request = request.bearer_auth(key.expose());
        }
        let response = request.send().await.map_err(|e| self.transport_error(e))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| self.transport_error(e))?;
        if !status.is_success() {
            return Err(ModelError::status(status.as_u16(), &text));
        }
        parse_response(&text, &self.profile.model, body.len())
    }

    fn transport_error(&self, source: reqwest::Error) -> ModelError {
        if source.is_timeout() {
            ModelError::Timeout {
                timeout: self.profile.timeout,
            }
        } else {
            ModelError::Transport { source }
        }
    }
}

fn should_retry(error: &ModelError) -> bool {
    error.is_transient() && error.kind() != ModelErrorKind::Timeout
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let policy = RetryPolicy {
            max_retries: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
        };
        let waits: Vec<u128> = (0..5).map(|r| policy.backoff(r).as_millis()).collect();
        assert_eq!(waits, vec![100, 200, 350, 350, 350]);
        assert_eq!(policy.backoff(64), Duration::from_millis(350));
    }
}
