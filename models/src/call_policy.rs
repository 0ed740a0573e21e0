//! What every provider client does around its HTTP attempts: the GenAI `chat` span, the wait
//! before a retry per the [`RetryPolicy`] (backoff with jitter, or the server's
//! `Retry-After`), and the cost of the reply from the profile's price table.
//!
//! (Each client runs its own small retry loop with these helpers rather than handing a closure
//! that returns a future to a generic driver: such closures make rustc unable to prove the
//! callers' futures `Send` in generic contexts.)

use tracing::field::Empty;
use tracing::Span;

use crate::chat_types::ChatResponse;
use crate::model_error::ModelError;
use crate::pricing::priced;
use crate::profile_config::ModelProfile;
use crate::retry::RetryPolicy;

pub(crate) fn chat_span(profile: &ModelProfile) -> Span {
    tracing::info_span!(
        "chat",
        otel.name = %format!("chat {}", profile.model),
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = profile.provider.as_str(),
        gen_ai.request.model = %profile.model,
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        loopgate.model_profile = %profile.name,
        loopgate.cost_micros = Empty,
        loopgate.retries = Empty,
        loopgate.tool_calls_from_content = Empty,
        error.type = Empty,
    )
}

/// Sleeps before retry number `retries` and returns true, or returns false at once when
/// `error` is not worth (another) retry.
pub(crate) async fn wait_before_retry(
    retry: &RetryPolicy,
    retries: u32,
    error: &ModelError,
) -> bool {
    let Some(wait) = retry.delay(retries, error, rand::random::<f64>()) else {
        return false;
    };
    tracing::warn!(
        error = %error,
        kind = ?error.kind(),
        retry = retries + 1,
        wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        "transient model error; retrying"
    );
    tokio::time::sleep(wait).await;
    true
}

/// Prices the reply and records the outcome on the span (the prompt tokens read from the
/// provider's cache only when there were some).
pub(crate) fn finish_call(
    span: &Span,
    profile: &ModelProfile,
    result: Result<ChatResponse, ModelError>,
    retries: u32,
) -> Result<ChatResponse, ModelError> {
    span.record("loopgate.retries", retries);
    let result = result.map(|mut response| {
        response.usage = priced(response.usage, profile.price.as_ref());
        response
    });
    match &result {
        Ok(response) => {
            span.record("gen_ai.response.model", response.model.as_str());
            span.record("gen_ai.usage.input_tokens", response.usage.input_tokens);
            span.record("gen_ai.usage.output_tokens", response.usage.output_tokens);
            if response.usage.cached_prompt_tokens > 0 {
                span.record(
                    "gen_ai.usage.cache_read.input_tokens",
                    response.usage.cached_prompt_tokens,
                );
            }
            span.record("loopgate.cost_micros", response.usage.cost_micros);
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
