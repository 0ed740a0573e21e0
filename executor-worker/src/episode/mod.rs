//! One episode: materialize the base snapshot into a fresh directory, run the agent the request
//! names (the built-in tool loop with a model profile, or an external CLI agent profile), freeze
//! the workspace, and turn it all into an `ExecOutcome`.

pub(crate) mod agent_episode;
pub(crate) mod env;
pub(crate) mod model_episode;
pub(crate) mod workspace_dir;

use std::sync::Arc;

use loopgate_protocol::transcript::Transcript;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::wire::ExecRequest;

use self::agent_episode::run_agent_episode;
pub use self::env::{EpisodeEnd, EpisodeEnv};
use self::model_episode::run_episode_with;
use crate::observe::Observer;

/// Run one episode with the agent or model named by the request's `executor_profile`.
pub async fn run_episode(req: &ExecRequest, attempt: u64, env: &EpisodeEnv) -> EpisodeEnd {
    run_episode_observed(req, attempt, env, Observer::default()).await
}

/// [`run_episode`], also giving back the episode's transcript as the worker stores it: every
/// text redacted with `secrets`, bounded.
pub async fn run_episode_transcribed(
    req: &ExecRequest,
    attempt: u64,
    env: &EpisodeEnv,
    secrets: Vec<String>,
) -> (EpisodeEnd, Option<Transcript>) {
    let observer = Observer::new(Transcript::default(), Arc::new(secrets), None);
    let end = run_episode_observed(req, attempt, env, observer.clone()).await;
    (end, observer.transcript())
}

/// [`run_episode`], telling `observer` what the agent does (progress and transcript).
pub(crate) async fn run_episode_observed(
    req: &ExecRequest,
    attempt: u64,
    env: &EpisodeEnv,
    observer: Observer,
) -> EpisodeEnd {
    if let Some(agent) = env.agents.get(&req.executor_profile) {
        return run_agent_episode(req, attempt, env, agent, &observer).await;
    }
    let Some(client) = env.models.get(&req.executor_profile) else {
        let known: Vec<&str> = env
            .models
            .keys()
            .chain(env.agents.keys())
            .map(String::as_str)
            .collect();
        return EpisodeEnd::failed(
            format!(
                "unknown executor profile '{}'; this worker has: {}",
                req.executor_profile,
                if known.is_empty() {
                    "(none)".to_string()
                } else {
                    known.join(", ")
                }
            ),
            Usage::default(),
        );
    };
    run_episode_with(req, attempt, env, client, observer).await
}
