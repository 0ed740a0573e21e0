mod conformance;
mod live_providers;
mod structured_output;
mod vision;
