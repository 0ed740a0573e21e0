//! The manager's HTTP API against its own OpenAPI document: schemathesis (PyPI, installed into
//! `$LOOPGATE_CACHE/venv` by `scripts/install-deps.sh services`) fuzzes a live manager
//! (nats-server, redis-server and the manager on free loopback ports, no workers) from
//! `/openapi.json`, without and with a bearer token, with every check (`--checks all`), and
//! must find nothing: every status, content type, header and body as documented, invalid data
//! rejected, schema-valid data accepted (where a rule is beyond a JSON Schema, the config
//! below says which and why), no 5xx.
//!
//! Bounded (a fixed seed, `MAX_EXAMPLES` cases per operation, one worker) to stay near half a
//! minute per token mode. `LOOPGATE_SKIP_SCHEMATHESIS=1` skips it with a SKIP line; a missing
//! schemathesis is a failure.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use base64::Engine as _;
use loopgate_test_support::cache_dir;
use loopgate_tests::{ControlPlane, Profile};
use serde_json::json;

const MAX_EXAMPLES: &str = "25";
const SEED: &str = "1";
/// Far above a normal run (about 30 s on two cores), so only a hang trips it.
const LIMIT: Duration = Duration::from_secs(300);
const FILE: &[u8] = b"print('hello')\n";

/// The schemathesis binary, or None when the test is skipped on purpose.
fn schemathesis() -> anyhow::Result<Option<PathBuf>> {
    if std::env::var("LOOPGATE_SKIP_SCHEMATHESIS").is_ok_and(|v| v == "1") {
        println!(
            "SKIPPED the schemathesis API conformance test: LOOPGATE_SKIP_SCHEMATHESIS=1 \
             (the manager's API was NOT fuzzed against /openapi.json)"
        );
        return Ok(None);
    }
    let bin = cache_dir().join("venv/bin/schemathesis");
    anyhow::ensure!(
        bin.exists(),
        "{} is missing: run scripts/install-deps.sh services \
         (or set LOOPGATE_SKIP_SCHEMATHESIS=1 to skip this test)",
        bin.display()
    );
    Ok(Some(bin))
}

/// Real ids for the operations that read a run, a snapshot or a blob (random ones only ever
/// reach 404), and what "valid data is accepted" means where the schema cannot say it all.
fn config(run: &str, snapshot: &str, blob: &str) -> String {
    format!(
        r#"# Written by tests/tests/suite/openapi_conformance.rs.
[[operations]]
include-path-regex = "^/v1/runs/\\{{id\\}}"
parameters = {{ "path.id" = "{run}" }}

[[operations]]
include-path = "/v1/snapshots/{{id}}"
parameters = {{ "path.id" = "{snapshot}" }}

[[operations]]
include-path = "/v1/snapshots/{{id}}/integrity"
parameters = {{ "path.id" = "{snapshot}" }}

[[operations]]
include-path = "/v1/snapshots/{{from}}/diff/{{to}}"
parameters = {{ "path.from" = "{snapshot}", "path.to" = "{snapshot}" }}

# The console's one script asset the document describes as JavaScript.
[[operations]]
include-path = "/ui/{{file}}"
parameters = {{ "path.file" = "app.js" }}

[[operations]]
include-path = "/v1/blobs/{{sha256}}"
parameters = {{ "path.sha256" = "{blob}" }}

# Each body's own rules are in the document: lengths, ranges and patterns declared on the
# types (goals and answers not blank, budgets in range, workspace paths relative, contents
# base64), so `answer`, `instructions` and `resume` are held to "a schema-valid body is
# accepted" (2xx, or 409 while the run is in a state the change does not apply to). Three
# kinds of rule no JSON Schema of the body can state, so only these operations may also
# answer 400:
# - a task file (`POST /v1/runs`, the `task` of `continue`) must name model profiles this
#   manager is configured with (`invalid_task`), and meet rules across keys: criteria or
#   `plan = true`, a rubric or a judged criterion needs `roles.auditor`, unique criterion ids,
#   `require_approval` needs `plan`, `gui.serve` needs a loopback `gui.url`; `continue` also
#   needs `goal` or `task` (`invalid_request`);
# - `POST /v1/tasks/parse` carries a task file as TOML text, which must parse and validate;
# - `approve` may carry an edited contract as TOML text (`invalid_contract`).
[[operations]]
include-name = ["POST /v1/runs", "POST /v1/runs/{{id}}/continue", "POST /v1/tasks/parse", "POST /v1/runs/{{id}}/approve"]
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "404", "409"]
"#
    )
}

async fn fuzz(token: Option<&str>) -> anyhow::Result<()> {
    let Some(bin) = schemathesis()? else {
        return Ok(());
    };
    let mode = if token.is_some() {
        "with a token"
    } else {
        "without a token"
    };
    let profiles = [Profile::new("mgr", "http://127.0.0.1:9/v1", "unreachable")];
    let plane = ControlPlane::start(&profiles, token).await?;
    let run = plane
        .submit(&json!({
            "task": {"goal": "g", "acceptance": [{"id": "a", "check": "true"}], "roles": {"manager": "mgr"}},
            "workspace": {"files": [{"path": "hello.py",
                "content_b64": base64::engine::general_purpose::STANDARD.encode(FILE)}]}
        }))
        .await?;
    let cfg = plane.dir.path().join("schemathesis.toml");
    std::fs::write(
        &cfg,
        config(
            run["id"].as_str().context("run id")?,
            run["base_snapshot"].as_str().context("base snapshot")?,
            &loopgate_protocol::snapshot::sha256_hex(FILE),
        ),
    )?;
    let mut cmd = tokio::process::Command::new(&bin);
    cmd.current_dir(plane.dir.path())
        .arg("--config-file")
        .arg(&cfg)
        .arg("run")
        .arg(format!("{}/openapi.json", plane.http))
        .args(["--checks", "all"])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--max-examples", MAX_EXAMPLES, "--seed", SEED])
        // One worker: concurrent workers trip a CPython 3.11 `ast` race inside Hypothesis.
        .args(["--workers", "1"])
        .args(["--generation-database", "none", "--request-timeout", "10"])
        .arg("--no-color")
        .kill_on_drop(true);
    if let Some(token) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    let out = tokio::time::timeout(LIMIT, cmd.output())
        .await
        .with_context(|| format!("schemathesis ({mode}) did not finish within {LIMIT:?}"))??;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    anyhow::ensure!(
        out.status.success(),
        "schemathesis ({mode}) failed with {}:\n{text}\n--- manager ---\n{}",
        out.status,
        plane.manager.log_tail(6000)
    );
    let summary = text
        .lines()
        .rev()
        .find(|l| l.contains(" generated"))
        .unwrap_or("")
        .trim();
    println!("schemathesis ({mode}): {summary}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_matches_its_openapi_document_without_a_token() -> anyhow::Result<()> {
    fuzz(None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_matches_its_openapi_document_with_a_token() -> anyhow::Result<()> {
    fuzz(Some("schemathesis-token")).await
}
