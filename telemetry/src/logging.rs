//! Logging: JSON lines on stderr, filtered by `LOOPGATE_LOG`, then `RUST_LOG`, then a default.

use tracing_subscriber::EnvFilter;

/// The filter directive in effect: `LOOPGATE_LOG`, else `RUST_LOG`, else `default_filter`.
/// Unparseable directives fall through to the next source.
fn resolve_filter(
    loopgate_log: Option<&str>,
    rust_log: Option<&str>,
    default_filter: &str,
) -> EnvFilter {
    [loopgate_log, rust_log, Some(default_filter)]
        .into_iter()
        .flatten()
        .filter(|s| !s.trim().is_empty())
        .find_map(|directives| EnvFilter::try_new(directives).ok())
        .unwrap_or_else(|| EnvFilter::new("info"))
}

/// Install the global JSON subscriber for `service`. Returns false (and changes nothing) when a
/// global subscriber is already installed, so calling it twice is harmless.
pub fn init_logging(service: &str, default_filter: &str) -> bool {
    let loopgate_log = std::env::var("LOOPGATE_LOG").ok();
    let rust_log = std::env::var("RUST_LOG").ok();
    let filter = resolve_filter(loopgate_log.as_deref(), rust_log.as_deref(), default_filter);
    let installed = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_current_span(true)
        .with_target(true)
        .try_init()
        .is_ok();
    if installed {
        tracing::info!(
            service,
            version = env!("CARGO_PKG_VERSION"),
            "logging initialised"
        );
    }
    installed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_precedence() {
        let cases = [
            (Some("debug"), Some("warn"), "info", "debug"),
            (None, Some("warn"), "info", "warn"),
            (None, None, "error", "error"),
            (Some(""), Some("trace"), "info", "trace"),
            (Some("=^bad[["), None, "warn", "warn"),
        ];
        for (loopgate, rust, default, expected) in cases {
            assert_eq!(
                resolve_filter(loopgate, rust, default).to_string(),
                expected
            );
        }
    }

    #[test]
    fn second_init_is_harmless() {
        let _first = init_logging("test", "info");
        assert!(!init_logging("test", "info"));
    }
}
