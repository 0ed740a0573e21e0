mod conformance;
mod live_providers;
mod prompt_cache;
mod structured_output;
mod vision;
