//! One run = one trace: with a real OTLP receiver (PyPI `oteltap`, http/protobuf) listening,
//! the manager's, executor's and auditor's spans form a single connected trace with the GenAI
//! semantic-convention names and attributes.

use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::time::Duration;

use loopgate_test_support::{cache_dir, free_port, ChildGuard};
use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

const TASK: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
[roles]
manager = "mgr"
executor = "exec"
[budget]
# The trace holds the manager's decision: it decides the first step (not the goal's clause).
clause_steps = false
"#;

fn attr<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| &a["value"])
}

fn spans_in(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|v| {
            v.get("spanId").is_some()
                && v.get("startTimeUnixNano").is_some()
                && v["name"].is_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_is_one_connected_trace_across_all_binaries() -> anyhow::Result<()> {
    let oteltap = cache_dir().join("venv/bin/oteltap");
    anyhow::ensure!(
        oteltap.exists(),
        "{} is missing: run scripts/install-deps.sh services",
        oteltap.display()
    );
    let port = free_port()?;
    let mut cmd = Command::new(&oteltap);
    cmd.args(["--port", &port.to_string()]);
    let mut receiver = ChildGuard::spawn("oteltap", cmd)?;
    // A cold Python start can take seconds: the daemons' exports before it listens would be lost.
    receiver
        .wait_ready(Duration::from_secs(60), || async move {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await?;
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [Reply::content("Next: cli\nTask: write hello.py")],
            )
            .replies(
                "standin-executor",
                [
                    Reply::tool_call(
                        "write_file",
                        json!({"path": "hello.py", "content": "print('hello, loopgate')\n"}),
                    ),
                    Reply::tool_call("finish", json!({"summary": "done"})),
                ],
            ),
    )
    .await?;
    let mut opts = StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
        ],
        1,
    );
    opts.env = vec![
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT".into(),
            format!("http://127.0.0.1:{port}"),
        ),
        ("OTEL_EXPORTER_OTLP_PROTOCOL".into(), "http/protobuf".into()),
        ("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into()),
        ("OTEL_METRIC_EXPORT_INTERVAL".into(), "500".into()),
    ];
    opts.worker_metrics = true;
    let mut stack = Stack::start(opts).await?;
    let id = stack.submit(TASK, &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(done["state"], "completed");
    // Every metric the Grafana dashboard queries is exported by some binary's /metrics.
    let mut scraped = reqwest::get(format!("{}/metrics", stack.http))
        .await?
        .text()
        .await?;
    for worker in &stack.worker_metrics {
        scraped.push_str(
            &reqwest::get(format!("{worker}/metrics"))
                .await?
                .text()
                .await?,
        );
    }
    let wanted_metrics = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/grafana/metrics.txt"
    ))?;
    for name in wanted_metrics
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        assert!(
            scraped
                .lines()
                .any(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' '])),
            "the dashboard queries {name}, which no binary exports"
        );
    }
    // SIGTERM: every daemon drains and flushes its telemetry.
    stack.stop_gracefully(Duration::from_secs(20)).await;

    let wanted = [
        "invoke_workflow loopgate",
        "invoke_agent manager",
        "invoke_agent executor",
        "invoke_agent auditor",
        "chat standin-manager",
        "chat standin-executor",
        "execute_tool write_file",
    ];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let spans = loop {
        let spans = spans_in(&receiver.log_text());
        let names: HashSet<String> = spans
            .iter()
            .filter_map(|s| s["name"].as_str().map(str::to_string))
            .collect();
        if wanted.iter().all(|w| names.contains(*w)) {
            break spans;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "spans missing: {:?}; seen: {names:?}\n--- oteltap ---\n{}\n{}",
            wanted
                .iter()
                .filter(|w| !names.contains(**w))
                .collect::<Vec<_>>(),
            receiver.log_tail(4000),
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let root = spans
        .iter()
        .find(|s| {
            s["name"] == "invoke_workflow loopgate"
                && attr(s, "loopgate.run_id").and_then(|v| v["stringValue"].as_str())
                    == Some(id.as_str())
        })
        .cloned()
        .unwrap_or_default();
    let trace_id = root["traceId"].as_str().unwrap_or_default().to_string();
    assert!(!trace_id.is_empty(), "the run's root span was exported");
    let run_spans: Vec<&Value> = spans
        .iter()
        .filter(|s| s["traceId"] == trace_id.as_str())
        .collect();
    let names: HashSet<&str> = run_spans
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    for w in wanted {
        assert!(
            names.contains(w),
            "{w} is not in the run's trace (it has {names:?})"
        );
    }
    // Connected: every span's parent is in the trace, and only the root has none.
    let ids: HashMap<&str, &Value> = run_spans
        .iter()
        .filter_map(|s| Some((s["spanId"].as_str()?, *s)))
        .collect();
    for s in &run_spans {
        let parent = s["parentSpanId"].as_str().unwrap_or("");
        if s["spanId"] == root["spanId"] {
            assert_eq!(parent, "", "the root has no parent");
        } else {
            assert!(
                ids.contains_key(parent),
                "{} has a parent outside the trace",
                s["name"]
            );
        }
    }
    // GenAI attributes on model calls and agents.
    let chat = run_spans
        .iter()
        .find(|s| s["name"] == "chat standin-executor")
        .copied()
        .unwrap_or(&Value::Null);
    for key in [
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
    ] {
        assert!(attr(chat, key).is_some(), "chat span lacks {key}: {chat}");
    }
    for agent in [
        "invoke_agent manager",
        "invoke_agent executor",
        "invoke_agent auditor",
    ] {
        let span = run_spans
            .iter()
            .find(|s| s["name"] == agent)
            .copied()
            .unwrap_or(&Value::Null);
        assert!(
            attr(span, "gen_ai.agent.name").is_some(),
            "{agent} lacks gen_ai.agent.name"
        );
        assert_eq!(
            attr(span, "loopgate.run_id").and_then(|v| v["stringValue"].as_str()),
            Some(id.as_str()),
            "{agent}"
        );
    }
    let mut seen: Vec<&str> = names.into_iter().collect();
    seen.sort();
    println!("span names in the run's trace: {seen:?}");
    drop(receiver);
    Ok(())
}
