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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use loopgate_protocol::usage::Usage;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    use super::*;
    use crate::profile_config::{Provider, StructuredOutput};

    /// The fields recorded on spans, by name.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<(String, String)>>>);

    impl Visit for Recorder {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0
                .lock()
                .unwrap()
                .push((field.name().to_string(), format!("{value:?}")));
        }
    }

    impl Subscriber for Recorder {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, span: &Attributes<'_>) -> Id {
            span.record(&mut self.clone());
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, values: &Record<'_>) {
            values.record(&mut self.clone());
        }
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, _: &Event<'_>) {}
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    fn profile() -> ModelProfile {
        ModelProfile {
            name: "executor".into(),
            provider: Provider::OpenAi,
            base_url: "http://127.0.0.1:1/v1".into(),
            model: "m".into(),
            api_key: None,
            timeout: Duration::from_secs(5),
            max_tokens: None,
            temperature: None,
            context_window: None,
            stream: false,
            price: None,
            structured_output: StructuredOutput::Off,
            vision: false,
            extra_body: serde_json::Map::new(),
        }
    }

    #[test]
    fn the_chat_span_records_cached_prompt_tokens_when_some() {
        // (the reply's usage, the recorded gen_ai.usage.cache_read.input_tokens)
        let cases = [
            (Usage::tokens(100, 5), None),
            (Usage::tokens(100, 5).with_cached(64), Some("64")),
        ];
        for (usage, want) in cases {
            let recorder = Recorder::default();
            let response = ChatResponse {
                content: Some("ok".into()),
                tool_calls: Vec::new(),
                tool_calls_from_content: false,
                finish_reason: None,
                usage,
                model: "m".into(),
            };
            tracing::subscriber::with_default(recorder.clone(), || {
                let span = chat_span(&profile());
                finish_call(&span, &profile(), Ok(response), 0).unwrap();
            });
            let fields = recorder.0.lock().unwrap().clone();
            let field = |name: &str| {
                fields
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone())
            };
            assert_eq!(
                field("gen_ai.usage.cache_read.input_tokens").as_deref(),
                want
            );
            assert_eq!(field("gen_ai.usage.input_tokens").as_deref(), Some("100"));
        }
    }
}
