//! The manager's own episode: build the bounded prompt, call the manager model, and feed the
//! raw reply (parsed purely in `decide`) back into the engine. The request declares the reply's
//! JSON schema (`next_step_schema`, with only the routes offered); the adapter sends it when the
//! manager's profile says `structured_output = "json_schema"`, and the reply is parsed
//! defensively either way.

use std::collections::BTreeMap;
use std::time::Duration;

use loopgate_common::decide::manager_prompt;
use loopgate_common::decide::RunEvent;
use loopgate_common::next_step::{next_step_schema, NEXT_STEP_SCHEMA_NAME};
use loopgate_common::state::{Phase, RunRecord};
use loopgate_models::{ChatClient, ChatMessage, ChatRequest, StructuredOutput};
use loopgate_protocol::gui::GuiBackend;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::wire::DecideRequest;
use loopgate_telemetry::otel::set_remote_parent;
use tracing::Instrument;

use crate::engine::{Applied, Engine, EngineError};

/// Is this decision request still the one the run waits for?
pub(crate) fn is_current(record: &RunRecord, req: &DecideRequest) -> bool {
    record.generation == req.generation && record.phase == Phase::Deciding { seq: req.seq }
}

/// Ask the manager model for the next step and apply its reply.
pub(crate) async fn take_decision(
    engine: &Engine,
    models: &BTreeMap<String, ChatClient>,
    char_budget: usize,
    gui_offered_for: impl Fn(GuiBackend) -> bool,
    req: &DecideRequest,
) -> Result<Applied, EngineError> {
    let Some((_, record)) = engine.load(&req.run_id).await? else {
        return Ok(Applied::Ignored("run no longer exists".into()));
    };
    // The gui route is offered while a live executor serves the backend this task needs.
    let gui_offered = gui_offered_for(
        record
            .task
            .gui
            .as_ref()
            .map(|g| g.backend)
            .unwrap_or_default(),
    );
    if !is_current(&record, req) {
        // Acked and gone once ignored: only against a state the replicas hold too (see
        // `Engine::apply`).
        engine.store().replica_barrier().await?;
        return Ok(Applied::Ignored(format!(
            "decision {} is not pending",
            req.seq
        )));
    }
    let profile = &record.task.roles.manager;
    let span = tracing::info_span!(
        "invoke_agent manager",
        "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.agent.name" = "manager",
        "loopgate.run_id" = %req.run_id,
        "loopgate.round" = record.round,
        "loopgate.generation" = record.generation,
        "loopgate.route" = tracing::field::Empty,
    );
    set_remote_parent(&span, record.trace_parent.as_deref());
    let started = std::time::Instant::now();
    let event = decide_with_model(models, char_budget, gui_offered, &record, req, profile)
        .instrument(span.clone())
        .await;
    engine
        .metrics()
        .record_episode("manager", started.elapsed().as_secs_f64());
    if let RunEvent::ManagerReplied { raw, .. } = &event {
        if let Ok(step) = loopgate_common::next_step::parse_next_step(raw) {
            span.record("loopgate.route", step.route.as_str());
        }
    }
    engine.apply(&req.run_id, &event).instrument(span).await
}

async fn decide_with_model(
    models: &BTreeMap<String, ChatClient>,
    char_budget: usize,
    gui_offered: bool,
    record: &RunRecord,
    req: &DecideRequest,
    profile: &str,
) -> RunEvent {
    match models.get(profile) {
        None => RunEvent::ManagerFailed {
            generation: req.generation,
            seq: req.seq,
            error: format!("model profile '{profile}' is not configured on this manager"),
            usage: Usage::default(),
        },
        Some(client) => {
            let structured = client.profile().structured_output == StructuredOutput::JsonSchema;
            let request = decision_request(record, char_budget, gui_offered);
            let limit = Duration::from_secs(record.task.budget.manager_episode_secs);
            let started = std::time::Instant::now();
            let outcome = tokio::time::timeout(limit, client.chat(&request)).await;
            tracing::info!(
                run_id = %req.run_id,
                seq = req.seq,
                elapsed_ms = started.elapsed().as_millis() as u64,
                structured,
                "manager model replied"
            );
            match outcome {
                Ok(Ok(response)) => RunEvent::ManagerReplied {
                    generation: req.generation,
                    seq: req.seq,
                    raw: response.content.unwrap_or_default(),
                    usage: response.usage,
                    gui_offered,
                },
                Ok(Err(e)) => RunEvent::ManagerFailed {
                    generation: req.generation,
                    seq: req.seq,
                    error: e.to_string(),
                    usage: Usage::default(),
                },
                Err(_) => RunEvent::ManagerFailed {
                    generation: req.generation,
                    seq: req.seq,
                    error: format!("manager episode exceeded {} s", limit.as_secs()),
                    usage: Usage::default(),
                },
            }
        }
    }
}

/// The decision request: the system prompt, the bounded user prompt, and the reply's schema
/// (the prompt is the same whether or not the schema is sent: a server that enforces it turns
/// the three parts into the schema's three keys).
fn decision_request(record: &RunRecord, char_budget: usize, gui_offered: bool) -> ChatRequest {
    ChatRequest::new(vec![
        ChatMessage::system(manager_prompt::system_prompt(gui_offered)),
        ChatMessage::user(manager_prompt::user_prompt(record, char_budget)),
    ])
    .with_reply_schema(NEXT_STEP_SCHEMA_NAME, next_step_schema(gui_offered))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use loopgate_common::decide::start_run;
    use loopgate_common::task::parse_task_toml;

    use super::*;

    fn system_text(request: &ChatRequest) -> &str {
        match &request.messages[0] {
            ChatMessage::System { content } => content,
            other => panic!("not a system message: {other:?}"),
        }
    }

    #[test]
    fn decision_request_table() {
        let task = parse_task_toml(
            "goal = \"Create hello.py\"\n[[acceptance]]\nid = \"prints\"\ncheck = \"python3 hello.py\"\n",
        )
        .unwrap();
        let record = start_run("r1", task, "base", 0).record;
        // gui offered -> routes in the declared schema
        let cases: &[(bool, &[&str])] = &[
            (false, &["cli", "done", "blocked", "ask"]),
            (true, &["cli", "gui", "done", "blocked", "ask"]),
        ];
        for (gui_offered, routes) in cases {
            let request = decision_request(&record, 24_000, *gui_offered);
            let label = format!("gui_offered={gui_offered}");
            // The schema is always declared; the profile decides whether it is sent.
            let reply = request.reply_schema.as_ref().expect("declared");
            assert_eq!(reply.name, NEXT_STEP_SCHEMA_NAME, "{label}");
            assert_eq!(reply.schema, next_step_schema(*gui_offered), "{label}");
            assert_eq!(
                reply.schema["properties"]["next"]["enum"],
                serde_json::json!(routes),
                "{label}"
            );
            // The prompt is the manager's, unchanged.
            assert_eq!(
                system_text(&request),
                manager_prompt::system_prompt(*gui_offered),
                "{label}"
            );
            assert_eq!(request.messages.len(), 2, "{label}");
            assert_eq!(request.tools, Vec::new(), "{label}");
        }
    }
}
