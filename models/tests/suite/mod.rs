mod conformance;
mod live_providers;
