//! Role prompts.
pub mod executor;
pub mod manager;
