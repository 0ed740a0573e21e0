//! When and how long to wait before retrying a failed model call: exponential backoff with
//! jitter, or the server's `Retry-After` when it sent one.

use std::time::Duration;

use reqwest::header::HeaderMap;

use crate::model_error::{ModelError, ModelErrorKind};

/// Retries of one `chat` call on transient errors (transport failures, interrupted streams,
/// 408, 429 and 5xx). Timeouts are not retried: the profile's timeout already bounds a slow
/// model, and a retry would multiply the wait. Auth, quota, context-length and bad-request
/// errors are never retried, nor a 5xx saying the model's own tool call could not be parsed
/// (`CutToolCall`: the same request would sample the same runaway output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_retries: u32,
    /// Base wait before the first retry; doubled for each further one, capped at
    /// `max_backoff`. The actual wait is drawn from [base/2, base] (jitter).
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// The longest `Retry-After` honoured; a server asking for longer gets no retry and the
    /// caller sees the rate-limit error (with its `retry_after`).
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
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

    /// The exponential base for retry number `retry` (0 = first retry), before jitter.
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry).unwrap_or(u32::MAX);
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }

    /// How long to wait before retry number `retry` after `error`, or `None` to give up.
    /// `jitter` is a number in [0, 1) (random in production, fixed in tests).
    pub fn delay(&self, retry: u32, error: &ModelError, jitter: f64) -> Option<Duration> {
        if retry >= self.max_retries || !should_retry(error) {
            return None;
        }
        let jitter = if jitter.is_finite() {
            jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        match error.retry_after() {
            Some(asked) if asked > self.max_retry_after => None,
            // At least what the server asked, plus up to 10% so clients do not stampede.
            Some(asked) => Some(asked + asked.mul_f64(0.1 * jitter)),
            None => {
                let base = self.backoff(retry);
                Some(base / 2 + (base / 2).mul_f64(jitter))
            }
        }
    }
}

/// Transient, but not a timeout.
pub fn should_retry(error: &ModelError) -> bool {
    error.is_transient() && error.kind() != ModelErrorKind::Timeout
}

/// `retry-after-ms` (OpenAI) or `retry-after` in seconds (may be fractional). An HTTP-date
/// `Retry-After` is not understood and yields `None` (the backoff applies then).
pub fn retry_after_from_headers(headers: &HeaderMap) -> Option<Duration> {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = value("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        return seconds(ms / 1000.0);
    }
    value("retry-after")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .and_then(seconds)
}

fn seconds(secs: f64) -> Option<Duration> {
    (secs.is_finite() && (0.0..1e9).contains(&secs)).then(|| Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_retries: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            max_retry_after: Duration::from_secs(10),
        }
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let policy = policy();
        let waits: Vec<u128> = (0..5).map(|r| policy.backoff(r).as_millis()).collect();
        assert_eq!(waits, vec![100, 200, 350, 350, 350]);
        assert_eq!(policy.backoff(64), Duration::from_millis(350));
    }

    #[test]
    fn delay_table() {
        let ms = Duration::from_millis;
        let server = || ModelError::status(500, "boom");
        let limited = |secs| ModelError::status_after(429, "slow", Some(Duration::from_secs(secs)));
        let cases: Vec<(&str, u32, ModelError, f64, Option<Duration>)> = vec![
            (
                "500, first retry, no jitter",
                0,
                server(),
                0.0,
                Some(ms(50)),
            ),
            (
                "500, first retry, full jitter",
                0,
                server(),
                0.999_999,
                Some(ms(99)),
            ),
            (
                "500, third retry, half jitter",
                2,
                server(),
                0.5,
                Some(ms(262)),
            ),
            ("retries used up", 5, server(), 0.0, None),
            (
                "429 honours Retry-After",
                0,
                limited(2),
                0.0,
                Some(ms(2000)),
            ),
            (
                "429 Retry-After plus jitter",
                1,
                limited(2),
                0.5,
                Some(ms(2100)),
            ),
            ("429 asks for too long", 0, limited(11), 0.0, None),
            (
                "429 without header backs off",
                0,
                ModelError::status(429, "x"),
                0.0,
                Some(ms(50)),
            ),
            (
                "401 never",
                0,
                ModelError::status(401, "bad key"),
                0.0,
                None,
            ),
            ("quota never", 0, ModelError::status(402, "pay"), 0.0, None),
            (
                "context length never",
                0,
                ModelError::status(400, "context_length_exceeded"),
                0.0,
                None,
            ),
            (
                "malformed never",
                0,
                ModelError::malformed("x", "y"),
                0.0,
                None,
            ),
            (
                "timeout never",
                0,
                ModelError::Timeout { timeout: ms(1) },
                0.0,
                None,
            ),
            (
                "interrupted stream",
                0,
                ModelError::interrupted("cut"),
                0.0,
                Some(ms(50)),
            ),
        ];
        for (name, retry, error, jitter, want) in cases {
            let got = policy().delay(retry, &error, jitter);
            let got = got.map(|d| ms(d.as_millis() as u64));
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn retry_after_header_table() {
        type Headers = Vec<(&'static str, &'static str)>;
        let cases: Vec<(Headers, Option<Duration>)> = vec![
            (vec![("retry-after", "3")], Some(Duration::from_secs(3))),
            (
                vec![("retry-after", " 1.5 ")],
                Some(Duration::from_millis(1500)),
            ),
            (
                vec![("retry-after-ms", "250"), ("retry-after", "9")],
                Some(Duration::from_millis(250)),
            ),
            (vec![("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")], None),
            (vec![("retry-after", "-1")], None),
            (vec![], None),
        ];
        for (headers, want) in cases {
            let mut map = HeaderMap::new();
            for (name, value) in &headers {
                map.insert(*name, HeaderValue::from_static(value));
            }
            assert_eq!(retry_after_from_headers(&map), want, "{headers:?}");
        }
    }
}
