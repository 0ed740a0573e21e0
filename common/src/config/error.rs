//! The error of resolving a config value.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("config `{key}`: {problem}")]
    Invalid { key: String, problem: String },
}

impl ConfigError {
    pub fn invalid(key: impl Into<String>, problem: impl Into<String>) -> Self {
        ConfigError::Invalid {
            key: key.into(),
            problem: problem.into(),
        }
    }
}
