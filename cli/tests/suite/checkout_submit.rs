//! The built `loopgate` binary against a stand-in of the manager API: checkout (verified,
//! tampering refused), submit (local validation, upload, server errors), status, exit codes.

use super::standin;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;

use base64::Engine;
use loopgate_protocol::snapshot::{sha256_hex, Manifest, ManifestEntry};
use serde_json::{json, Value};
use standin::{loopgate, start, Canned};

fn entry(path: &str, mode: u32, content: &[u8]) -> ManifestEntry {
    ManifestEntry {
        path: path.into(),
        mode,
        size: content.len() as u64,
        sha256: sha256_hex(content),
    }
}

/// A run `r1` whose snapshot holds three files (two with the same content), with the blob of
/// `tamper` (if any) replaced by other bytes.
fn snapshot_canned(tamper: Option<&str>) -> (Canned, String) {
    let files: &[(&str, u32, &[u8])] = &[
        ("hello.py", 0o644, b"print('hello, loopgate')\n"),
        ("bin/run.sh", 0o755, b"#!/bin/sh\npython3 hello.py\n"),
        ("copy/hello.py", 0o644, b"print('hello, loopgate')\n"),
    ];
    let manifest = Manifest::new(files.iter().map(|(p, m, c)| entry(p, *m, c)).collect()).unwrap();
    let id = manifest.id();
    let mut blobs = HashMap::new();
    for (path, _, content) in files {
        let bytes = if Some(*path) == tamper {
            b"print('pwned')\n".to_vec()
        } else {
            content.to_vec()
        };
        blobs.insert(sha256_hex(content), bytes);
    }
    let canned = Canned {
        runs: HashMap::from([(
            "r1".to_string(),
            json!({"id": "r1", "state": "completed", "round": 2, "snapshot": id}),
        )]),
        manifests: HashMap::from([(id.clone(), serde_json::to_value(&manifest).unwrap())]),
        blobs,
        ..Canned::default()
    };
    (canned, id)
}

#[tokio::test]
async fn checkout_writes_verified_files_with_modes() {
    let (canned, _) = snapshot_canned(None);
    let server = start(canned).await;
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("out");
    let ran = loopgate(&server.url, &["checkout", "r1", dest.to_str().unwrap()]).await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(
        ran.stdout.trim(),
        std::fs::canonicalize(&dest).unwrap().to_str().unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(dest.join("hello.py")).unwrap(),
        "print('hello, loopgate')\n"
    );
    assert_eq!(
        std::fs::read_to_string(dest.join("copy/hello.py")).unwrap(),
        "print('hello, loopgate')\n"
    );
    let mode = |p: &str| {
        std::fs::metadata(dest.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("bin/run.sh"), 0o755);
    assert_eq!(mode("hello.py"), 0o644);
    assert_eq!(
        server.seen.lock().unwrap().blob_gets,
        2,
        "each distinct blob is fetched once"
    );
}

#[tokio::test]
async fn checkout_refuses_a_tampered_blob_naming_the_path() {
    let (canned, _) = snapshot_canned(Some("bin/run.sh"));
    let server = start(canned).await;
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("out");
    let ran = loopgate(&server.url, &["checkout", "r1", dest.to_str().unwrap()]).await;
    assert_eq!(ran.code, Some(1), "{}", ran.stdout);
    assert!(
        ran.stderr.contains("'bin/run.sh'") && ran.stderr.contains("hashes to"),
        "{}",
        ran.stderr
    );
    assert!(!dest.join("bin/run.sh").exists());
    assert!(ran.stdout.is_empty(), "no success output: {}", ran.stdout);
}

#[tokio::test]
async fn checkout_refuses_a_manifest_that_is_not_the_snapshot() {
    let (mut canned, id) = snapshot_canned(None);
    let mut manifest: Value = canned.manifests.remove(&id).unwrap();
    manifest["entries"][0]["mode"] = json!(0o777);
    canned.manifests.insert(id.clone(), manifest);
    let server = start(canned).await;
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("out");
    let ran = loopgate(
        &server.url,
        &["checkout", "r1", dest.to_str().unwrap(), "--snapshot", &id],
    )
    .await;
    assert_eq!(ran.code, Some(1));
    assert!(ran.stderr.contains("refusing"), "{}", ran.stderr);
    assert_eq!(server.seen.lock().unwrap().blob_gets, 0);
}

#[tokio::test]
async fn checkout_needs_an_empty_directory_and_a_known_run() {
    let (canned, _) = snapshot_canned(None);
    let server = start(canned).await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("existing"), "x").unwrap();
    let ran = loopgate(
        &server.url,
        &["checkout", "r1", root.path().to_str().unwrap()],
    )
    .await;
    assert_eq!(ran.code, Some(1));
    assert!(ran.stderr.contains("not empty"), "{}", ran.stderr);
    let ran = loopgate(
        &server.url,
        &["checkout", "nope", root.path().join("o").to_str().unwrap()],
    )
    .await;
    assert_eq!(ran.code, Some(1));
    assert!(ran.stderr.contains("not_found"), "{}", ran.stderr);
}

const VALID_TASK: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
"#;

#[tokio::test]
async fn submit_of_an_invalid_task_exits_1_naming_the_field_and_sends_nothing() {
    let server = start(Canned {
        create_reply: Some((201, json!({"id": "r9", "state": "queued"}))),
        ..Canned::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("task.toml");
    std::fs::write(
        &task,
        "goal = \"x\"\n[[acceptance]]\nid = \"a\"\nblocking = true\n",
    )
    .unwrap();
    let ran = loopgate(&server.url, &["submit", task.to_str().unwrap()]).await;
    assert_eq!(ran.code, Some(1));
    assert!(ran.stderr.contains("acceptance[0].check"), "{}", ran.stderr);
    assert!(server.seen.lock().unwrap().posts.is_empty());
}

#[tokio::test]
async fn submit_uploads_the_workspace_and_prints_the_run_id_first() {
    let server = start(Canned {
        create_reply: Some((201, json!({"id": "r-new", "state": "queued", "round": 0}))),
        ..Canned::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("task.toml");
    std::fs::write(&task, VALID_TASK).unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git/config"), "skip me").unwrap();
    std::fs::write(ws.join("README.md"), "# hi\n").unwrap();
    let ran = loopgate(
        &server.url,
        &[
            "--token",
            "s3cret",
            "submit",
            task.to_str().unwrap(),
            "--workspace",
            ws.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(ran.stdout.lines().next(), Some("r-new"));
    let seen = server.seen.lock().unwrap();
    let (auth, body) = &seen.posts[0];
    assert_eq!(auth.as_deref(), Some("Bearer s3cret"));
    assert_eq!(body["task"]["acceptance"][0]["id"], "prints-greeting");
    let files = body["workspace"]["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(files[0]["path"], "README.md");
    assert_eq!(files[0]["mode"], 0o644);
    let content = base64::engine::general_purpose::STANDARD
        .decode(files[0]["content_b64"].as_str().unwrap())
        .unwrap();
    assert_eq!(content, b"# hi\n");
}

#[tokio::test]
async fn server_errors_show_the_code_and_exit_1() {
    let server = start(Canned {
        create_reply: Some((
            400,
            json!({"error": {"code": "invalid_task", "message": "task field `roles.executor`: unknown profile"}}),
        )),
        ..Canned::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("task.toml");
    std::fs::write(&task, VALID_TASK).unwrap();
    let ran = loopgate(&server.url, &["submit", task.to_str().unwrap()]).await;
    assert_eq!(ran.code, Some(1));
    assert!(
        ran.stderr
            .contains("invalid_task: task field `roles.executor`"),
        "{}",
        ran.stderr
    );
}

#[tokio::test]
async fn status_exit_code_follows_the_run_state() {
    let runs = [
        ("done", "completed", 0),
        ("going", "running", 0),
        ("stuck", "blocked", 3),
        ("spent", "budget_exhausted", 3),
        ("asks", "waiting_for_input", 4),
    ];
    let server = start(Canned {
        runs: runs
            .iter()
            .map(|(id, state, _)| {
                (
                    id.to_string(),
                    json!({"id": id, "state": state, "round": 1, "snapshot": "ab"}),
                )
            })
            .collect(),
        ..Canned::default()
    })
    .await;
    for (id, state, code) in runs {
        let ran = loopgate(&server.url, &["status", id]).await;
        assert_eq!(ran.code, Some(code), "{id}: {}", ran.stderr);
        assert!(ran.stdout.contains(state), "{}", ran.stdout);
    }
    let ran = loopgate(&server.url, &["status", "done", "--json"]).await;
    let value: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(
        (value["id"].as_str(), value["state"].as_str()),
        (Some("done"), Some("completed"))
    );
}

#[tokio::test]
async fn unreachable_manager_exits_5() {
    let port = loopgate_test_support::free_port().unwrap();
    for args in [&["status", "r1"][..], &["watch", "r1"][..], &["runs"][..]] {
        let ran = loopgate(&format!("http://127.0.0.1:{port}"), args).await;
        assert_eq!(ran.code, Some(5), "{args:?}: {}", ran.stderr);
        assert!(ran.stderr.contains("loopgate up"), "{}", ran.stderr);
    }
}

#[tokio::test]
async fn help_documents_exit_codes_and_usage_errors_exit_2() {
    let ran = loopgate("http://127.0.0.1:1", &["--help"]).await;
    assert_eq!(ran.code, Some(0));
    assert!(
        ran.stdout.contains("Exit codes:") && ran.stdout.contains("waiting for input"),
        "{}",
        ran.stdout
    );
    let ran = loopgate("http://127.0.0.1:1", &["runs", "--state", "nope"]).await;
    assert_eq!(ran.code, Some(2));
}
