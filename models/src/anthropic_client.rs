//! HTTP client for the Anthropic Messages API (`POST {base_url}/messages`, `x-api-key`,
//! `anthropic-version`), whole or streamed (`stream = true` in the profile).

use reqwest::header::{HeaderMap, HeaderValue};
use tracing::Instrument;

use crate::anthropic_stream::AnthropicStream;
use crate::anthropic_wire::{parse_response, wire_request, ANTHROPIC_VERSION};
use crate::call_policy::{chat_span, finish_call, wait_before_retry};
use crate::chat_types::{ChatRequest, ChatResponse};
use crate::http_send::{http_client, post_json, secret_header};
use crate::model_error::ModelError;
use crate::profile_config::{structured_output_refused, ModelConfigError, ModelProfile, Provider};
use crate::retry::RetryPolicy;

#[derive(Debug, Clone)]
pub struct AnthropicClient {
    profile: ModelProfile,
    endpoint: String,
    http: reqwest::Client,
    retry: RetryPolicy,
}

impl AnthropicClient {
    /// A client for an `anthropic` profile. Each HTTP attempt is bounded by `profile.timeout`.
    pub fn new(profile: ModelProfile) -> Result<Self, ModelError> {
        if profile.provider != Provider::Anthropic {
            return Err(ModelError::Config(ModelConfigError::UnsupportedProvider {
                profile: profile.name.clone(),
                provider: profile.provider,
            }));
        }
        // A profile resolved from config never gets here with it; one built by hand might.
        if let Some(error) =
            structured_output_refused(&profile.name, profile.provider, profile.structured_output)
        {
            return Err(ModelError::Config(error));
        }
        Ok(AnthropicClient {
            endpoint: format!("{}/messages", profile.base_url.trim_end_matches('/')),
            http: http_client(profile.timeout)?,
            profile,
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

    /// One message, retried per the [`RetryPolicy`], priced per the profile.
    pub async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let body = serde_json::to_string(&wire_request(&self.profile, req))
            .map_err(|e| ModelError::InvalidRequest(e.to_string()))?;
        let span = chat_span(&self.profile);
        let attempts = async {
            let mut retries = 0;
            loop {
                match self.send_once(&body).await {
                    Err(error) if wait_before_retry(&self.retry, retries, &error).await => {
                        retries += 1
                    }
                    result => return (result, retries),
                }
            }
        };
        let (result, retries) = attempts.instrument(span.clone()).await;
        finish_call(&span, &self.profile, result, retries)
    }

    async fn send_once(&self, body: &str) -> Result<ChatResponse, ModelError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if let Some(key) = &self.profile.api_key {
            headers.insert("x-api-key", secret_header(key.expose())?);
        }
        let reply = post_json(
            &self.http,
            &self.endpoint,
            headers,
            body,
            self.profile.timeout,
        )
        .await?;
        let model = &self.profile.model;
        if !reply.is_event_stream() {
            let text = reply.text().await?;
            return parse_response(&text, model, body.len());
        }
        let mut stream = AnthropicStream::default();
        reply
            .events(|event| {
                stream.push(event)?;
                Ok(stream.is_done())
            })
            .await?;
        stream.finish(model, body.len())
    }
}
