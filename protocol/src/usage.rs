//! Token usage accounting, charged from the adapters' reported usage.

use serde::{Deserialize, Serialize};

/// Tokens and cost (micro-dollars) one role used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Usage {
    /// Prompt tokens, those read from the provider's prompt cache included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Cost in micro-dollars (1e-6 USD), from the model profile's price table or the agent's
    /// own report; 0 when unknown.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub cost_micros: u64,
    /// The part of `input_tokens` the provider read from its prompt cache (OpenAI
    /// `cached_tokens`, DeepSeek `prompt_cache_hit_tokens`, llama-server `cache_n`, Anthropic
    /// `cache_read_input_tokens`); 0 when none or not reported.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_prompt_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Token counts without a cost.
    pub fn tokens(input_tokens: u64, output_tokens: u64) -> Self {
        Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        }
    }
    /// With `cached` of the input tokens read from the prompt cache.
    pub fn with_cached(mut self, cached: u64) -> Self {
        self.cached_prompt_tokens = cached;
        self
    }
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
    pub fn add(&mut self, other: Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cost_micros = self.cost_micros.saturating_add(other.cost_micros);
        self.cached_prompt_tokens = self
            .cached_prompt_tokens
            .saturating_add(other.cached_prompt_tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_sums_tokens_and_cost_and_old_json_reads() {
        let mut usage = Usage::tokens(10, 2);
        usage.add(Usage {
            input_tokens: 5,
            output_tokens: 1,
            cost_micros: 7,
            cached_prompt_tokens: 4,
        });
        assert_eq!(
            usage,
            Usage {
                input_tokens: 15,
                output_tokens: 3,
                cost_micros: 7,
                cached_prompt_tokens: 4,
            }
        );
        assert_eq!(usage.total(), 18);
        let old: Usage =
            serde_json::from_str(r#"{"input_tokens":1,"output_tokens":2}"#).unwrap_or_default();
        assert_eq!(old, Usage::tokens(1, 2));
    }

    #[test]
    fn cached_tokens_are_written_only_when_some() {
        let cases = [
            (
                Usage::tokens(1, 2),
                r#"{"input_tokens":1,"output_tokens":2,"cost_micros":0}"#,
            ),
            (
                Usage::tokens(9, 2).with_cached(8),
                r#"{"input_tokens":9,"output_tokens":2,"cost_micros":0,"cached_prompt_tokens":8}"#,
            ),
        ];
        for (usage, json) in cases {
            assert_eq!(serde_json::to_string(&usage).unwrap_or_default(), json);
            let back: Usage = serde_json::from_str(json).unwrap_or_default();
            assert_eq!(back, usage);
        }
    }
}
