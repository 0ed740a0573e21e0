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
use loopgate_models::{ChatClient, ChatMessage, ChatRequest, ModelErrorKind, StructuredOutput};
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
            let limit = Duration::from_secs(record.task.budget.manager_episode_secs);
            let started = std::time::Instant::now();
            let outcome = tokio::time::timeout(
                limit,
                ask_fitting(client, record, char_budget, gui_offered, req),
            )
            .await;
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

/// The smallest prompt budget a decision shrinks to when its prompt does not fit the model.
const MIN_FITTING_CHAR_BUDGET: usize = 2_000;

/// The budget to try after a prompt of `budget` characters did not fit the model's context:
/// half of it, not below [`MIN_FITTING_CHAR_BUDGET`]; None once there.
fn smaller_char_budget(budget: usize) -> Option<usize> {
    (budget > MIN_FITTING_CHAR_BUDGET).then(|| (budget / 2).max(MIN_FITTING_CHAR_BUDGET))
}

/// Ask the manager model, with the prompt cut to a smaller budget each time the server says it
/// exceeds the model's context window (the configured budget counts characters, the window
/// tokens, and a small local model's window is smaller than a hosted one's); other errors, and
/// the last context error, go back as they are.
async fn ask_fitting(
    client: &ChatClient,
    record: &RunRecord,
    char_budget: usize,
    gui_offered: bool,
    req: &DecideRequest,
) -> Result<loopgate_models::ChatResponse, loopgate_models::ModelError> {
    let mut budget = char_budget;
    loop {
        let request = decision_request(record, budget, gui_offered);
        match client.chat(&request).await {
            Err(e) if e.kind() == ModelErrorKind::ContextLength => {
                let Some(smaller) = smaller_char_budget(budget) else {
                    return Err(e);
                };
                tracing::warn!(
                    run_id = %req.run_id,
                    seq = req.seq,
                    from_chars = budget,
                    to_chars = smaller,
                    "the manager prompt exceeds the model's context window; asking again with a smaller one"
                );
                budget = smaller;
            }
            other => return other,
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
    fn a_prompt_that_does_not_fit_is_halved_down_to_the_floor() {
        // (budget that did not fit, the next one to try)
        let rows = [
            (24_000, Some(12_000)),
            (12_000, Some(6_000)),
            (3_000, Some(MIN_FITTING_CHAR_BUDGET)),
            (MIN_FITTING_CHAR_BUDGET + 1, Some(MIN_FITTING_CHAR_BUDGET)),
            (MIN_FITTING_CHAR_BUDGET, None),
        ];
        for (budget, next) in rows {
            assert_eq!(smaller_char_budget(budget), next, "{budget}");
        }
    }

    /// A 1.5B manager behind llama-server's 8,192-token window answered HTTP 400 to a
    /// `web-shopping` prompt of 24,000 characters four times in a row, and the run failed with
    /// two thirds of its tokens unspent. The stand-in here refuses any prompt over 7,000
    /// characters the way llama-server does.
    #[tokio::test]
    async fn a_decision_whose_prompt_exceeds_the_window_is_asked_again_smaller() {
        use loopgate_models::ModelProfileConfig;
        use loopgate_test_support::{Fault, Reply, Script, StandInModel};

        let model = StandInModel::start(
            Script::new()
                .fallback(
                    "mgr",
                    Reply::dynamic(|request| {
                        let prompt = request["messages"][1]["content"]
                            .as_str()
                            .map_or(0, str::len);
                        if prompt > 7_000 {
                            Reply::fault(Fault::ContextLength)
                        } else {
                            Reply::content("Next: cli\nTask: create hello.py")
                        }
                    }),
                )
                .fallback("never-fits", Reply::fault(Fault::ContextLength)),
        )
        .await
        .unwrap();
        let client = |name: &str| {
            let profile = ModelProfileConfig {
                base_url: model.base_url(),
                model: name.into(),
                timeout_secs: 10,
                ..ModelProfileConfig::default()
            }
            .resolve(name, &|_| None)
            .unwrap();
            (
                name.to_string(),
                ChatClient::from_profile(&profile).unwrap(),
            )
        };
        let models = BTreeMap::from([client("mgr"), client("never-fits")]);
        // Forty criteria whose checks are 250 characters each: a prompt of over 10,000.
        let criteria: String = (0..40)
            .map(|i| {
                format!(
                    "[[acceptance]]\nid = \"c{i}\"\ncheck = \"python3 hello.py {}\"\n",
                    "x".repeat(234)
                )
            })
            .collect();
        let task = parse_task_toml(&format!("goal = \"Create hello.py\"\n{criteria}")).unwrap();
        let record = start_run("r1", task, "base", 0).record;
        let req = DecideRequest {
            run_id: "r1".into(),
            generation: record.generation,
            seq: 1,
        };
        let event = decide_with_model(&models, 24_000, false, &record, &req, "mgr").await;
        assert!(
            matches!(&event, RunEvent::ManagerReplied { raw, .. } if raw.contains("hello.py")),
            "{event:?}"
        );
        let sizes: Vec<usize> = model
            .requests("mgr")
            .iter()
            .map(|r| r["messages"][1]["content"].as_str().map_or(0, str::len))
            .collect();
        assert_eq!(sizes.len(), 3, "{sizes:?}");
        assert!(sizes[0] > 7_000 && sizes[2] <= 7_000, "{sizes:?}");

        // A window no budget fits: the last context error is the decision's failure.
        let event = decide_with_model(&models, 24_000, false, &record, &req, "never-fits").await;
        assert!(
            matches!(&event, RunEvent::ManagerFailed { error, .. } if error.contains("context")),
            "{event:?}"
        );
        // 24,000, 12,000, 6,000, 3,000 and 2,000 characters.
        assert_eq!(model.requests("never-fits").len(), 5);
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
