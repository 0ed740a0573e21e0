//! A certificate proves only what its signed report says completed the run (issue 38 item 8),
//! on a stack with per-role NATS users and a signing auditor: a task with
//! `complete_on_gate = false` passes its first round's audit (the honest auditor signs the
//! report, which the manager stores), the manager then asks a question, and the run is
//! cancelled. A certificate built from that stored, genuinely signed, passing round report,
//! with `state` written as "completed", does not verify against the pool's key (exit 6,
//! `purpose`): the auditor signed that a pass of this audit does not complete the run.

use std::process::Output;
use std::time::Duration;

use anyhow::{bail, Context};
use loopgate_manager::run_store::RunStore;
use loopgate_protocol::report::claims::ReportClaims;
use loopgate_protocol::wire::{AuditPurpose, AuditReport};
use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(90);
const NOT_VERIFIED: i32 = 6;

const TASK: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate"
complete_on_gate = false
[[acceptance]]
id = "prints-greeting"
description = "python3 hello.py prints the greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
blocking = true
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 3
self_checks = 0
"#;

async fn model() -> anyhow::Result<StandInModel> {
    StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [
                    Reply::content("Next: cli\nTask: write hello.py"),
                    Reply::content("Next: ask\nTask: Should it also print a newline?"),
                ],
            )
            .replies(
                "standin-executor",
                [
                    Reply::tool_call(
                        "write_file",
                        json!({"path": "hello.py", "content": "print('hello, loopgate')\n"}),
                    ),
                    Reply::tool_call("finish", json!({"summary": "wrote hello.py"})),
                ],
            ),
    )
    .await
}

async fn wait_state(stack: &Stack, id: &str, state: &str) -> anyhow::Result<Value> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let run = stack.run(id).await?;
        if run["state"] == state {
            return Ok(run);
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "run {id} is {}, not {state}\n{}",
                run["state"],
                stack.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn loopgate(stack: &Stack, args: &[&str]) -> anyhow::Result<Output> {
    let bin = loopgate_test_support::workspace_bin("loopgate")?;
    Ok(tokio::process::Command::new(bin)
        .args(["--server", &stack.http])
        .args(args)
        .env_remove("LOOPGATE_TRUSTED_KEYS")
        .env("XDG_CONFIG_HOME", "/nonexistent/loopgate-tests")
        .output()
        .await?)
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passing_round_report_of_a_cancelled_run_does_not_verify() -> anyhow::Result<()> {
    let model = model().await?;
    let profiles = vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ];
    let stack = Stack::start(StackOptions::new(profiles, 1).hardened()).await?;
    let id = stack.submit(TASK, &[]).await?["id"]
        .as_str()
        .context("run id")?
        .to_string();
    let waiting = wait_state(&stack, &id, "waiting_for_input").await?;
    let (status, body) = stack
        .post_raw(&format!("/v1/runs/{id}/cancel"), &json!({}))
        .await?;
    assert_eq!(status, 200, "{body}");
    let cancelled = wait_state(&stack, &id, "cancelled").await?;
    let snapshot = cancelled["snapshot"]
        .as_str()
        .context("snapshot")?
        .to_string();
    assert_eq!(waiting["snapshot"], cancelled["snapshot"]);

    // The honest round report the manager stored: passing, and signed by the pool.
    let store = RunStore::connect(&stack.redis.url(), Duration::from_secs(5)).await?;
    let stored = store
        .report(&id, &snapshot)
        .await?
        .context("the round report was stored")?;
    let report: AuditReport = serde_json::from_str(&stored)?;
    assert_eq!(report.purpose, AuditPurpose::Round);
    let claims = ReportClaims::of(&report);
    assert!(
        !claims.completes_run && claims.verdicts.all_pass(),
        "{stored}"
    );
    assert!(!report.signature.is_empty(), "{stored}");

    // The forger's certificate: everything genuine but the unsigned `state`.
    let manifest = stack.get(&format!("/v1/snapshots/{snapshot}")).await?;
    let contract = stack.get(&format!("/v1/runs/{id}/contract")).await?["contract"].clone();
    let keys_file = stack.auditor_keys_file.clone().context("a signed stack")?;
    let public = std::fs::read_to_string(&keys_file)?;
    let public = public
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .context("a key")?;
    let cert = json!({
        "format": "loopgate.certificate.v1",
        "run_id": id,
        "state": "completed",
        "snapshot": snapshot,
        "contract": contract,
        "report": claims,
        "signature": report.signature,
        "manifest": manifest,
        "trusted_keys": [{"key_id": report.key_id, "public_key": public.trim()}],
    });
    let work = tempfile::tempdir()?;
    let cert_path = work.path().join("cert.json");
    std::fs::write(&cert_path, cert.to_string())?;
    let tree = work.path().join("tree");
    let out = loopgate(&stack, &["checkout", &id, tree.to_str().context("path")?]).await?;
    assert!(out.status.success(), "{}", text(&out));

    let out = loopgate(
        &stack,
        &[
            "verify",
            "--offline",
            cert_path.to_str().context("path")?,
            "--snapshot",
            tree.to_str().context("path")?,
            "--key",
            keys_file.to_str().context("path")?,
            "--json",
        ],
    )
    .await?;
    assert_eq!(out.status.code(), Some(NOT_VERIFIED), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(stdout.lines().last().context("output")?)?;
    let checks: Vec<&str> = v["problems"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["check"].as_str())
        .collect();
    // The signature, the bindings, the verdicts and the evidence all hold: only the purpose
    // tells that this report never completed the run.
    assert_eq!(checks, ["purpose"], "{v}");
    assert_eq!(v["signed_by"], report.key_id, "{v}");
    Ok(())
}
