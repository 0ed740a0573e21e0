//! `loopgate diff` and `loopgate checkout --round` against a stand-in of the manager API:
//! the round's base -> candidate diff, verified content, and clear errors.

use super::standin;

use std::collections::HashMap;

use loopgate_protocol::snapshot::{sha256_hex, Manifest, ManifestEntry};
use serde_json::json;
use standin::{loopgate, start, Canned};

fn manifest(files: &[(&str, u32, &[u8])]) -> Manifest {
    Manifest::new(
        files
            .iter()
            .map(|(path, mode, content)| ManifestEntry {
                path: path.to_string(),
                mode: *mode,
                size: content.len() as u64,
                sha256: sha256_hex(content),
            })
            .collect(),
    )
    .unwrap()
}

/// Run `r1`: round 1 adds hello.py to an empty workspace, round 2 produced nothing, round 3
/// edits hello.py, adds run.sh and removes notes.txt. `tamper`: serve other bytes for it.
fn rounds_canned(tamper: Option<&[u8]>) -> Canned {
    let empty = Manifest::empty();
    let v1: &[u8] = b"print('v1')\n";
    let v2: &[u8] = b"print('v2')\nprint('more')\n";
    let notes: &[u8] = b"notes\n";
    let script: &[u8] = b"#!/bin/sh\npython3 hello.py\n";
    let one = manifest(&[("hello.py", 0o644, v1), ("notes.txt", 0o644, notes)]);
    let three = manifest(&[("hello.py", 0o644, v2), ("run.sh", 0o755, script)]);
    let mut blobs = HashMap::new();
    for content in [v1, v2, notes, script] {
        let served = if Some(content) == tamper {
            b"tampered\n".to_vec()
        } else {
            content.to_vec()
        };
        blobs.insert(sha256_hex(content), served);
    }
    let rounds = json!({"rounds": [
        {"round": 1, "base_snapshot": empty.id(), "candidate": one.id(), "verdicts": null, "gate_passed": false},
        {"round": 2, "base_snapshot": one.id(), "candidate": null, "verdicts": null, "gate_passed": null},
        {"round": 3, "base_snapshot": one.id(), "candidate": three.id(), "verdicts": null, "gate_passed": true},
    ]});
    Canned {
        runs: HashMap::from([(
            "r1".to_string(),
            json!({"id": "r1", "state": "completed", "round": 3, "snapshot": three.id()}),
        )]),
        rounds: HashMap::from([("r1".to_string(), rounds)]),
        manifests: [empty, one, three]
            .into_iter()
            .map(|m| (m.id(), serde_json::to_value(&m).unwrap()))
            .collect(),
        blobs,
        ..Canned::default()
    }
}

#[tokio::test]
async fn diff_shows_the_latest_round_with_a_candidate() {
    let server = start(rounds_canned(None)).await;
    let ran = loopgate(&server.url, &["diff", "r1"]).await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let expected = "\
diff --git a/hello.py b/hello.py
--- a/hello.py
+++ b/hello.py
@@ -1 +1,2 @@
-print('v1')
+print('v2')
+print('more')
diff --git a/notes.txt b/notes.txt
deleted file mode 100644
--- a/notes.txt
+++ /dev/null
@@ -1 +0,0 @@
-notes
diff --git a/run.sh b/run.sh
new file mode 100755
--- /dev/null
+++ b/run.sh
@@ -0,0 +1,2 @@
+#!/bin/sh
+python3 hello.py
";
    assert_eq!(ran.stdout, expected);
    assert!(ran.stderr.contains("round 3"), "{}", ran.stderr);

    let ran = loopgate(
        &server.url,
        &["diff", "r1", "--round", "1", "--name-status"],
    )
    .await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(ran.stdout, "A\thello.py\nA\tnotes.txt\n");
}

#[tokio::test]
async fn rounds_without_a_candidate_or_unknown_rounds_are_clear_errors() {
    let server = start(rounds_canned(None)).await;
    let cases: &[(&[&str], &str)] = &[
        (
            &["diff", "r1", "--round", "2"],
            "round 2 of run r1 produced no candidate",
        ),
        (&["diff", "r1", "--round", "9"], "run r1 has no round 9"),
        (&["diff", "nope"], "no such run"),
    ];
    for (args, message) in cases {
        let ran = loopgate(&server.url, args).await;
        assert_eq!(ran.code, Some(1), "{args:?}: {}", ran.stderr);
        assert!(ran.stderr.contains(message), "{args:?}: {}", ran.stderr);
    }
}

#[tokio::test]
async fn tampered_content_is_refused_by_diff_and_checkout() {
    let server = start(rounds_canned(Some(b"print('v1')\n"))).await;
    let ran = loopgate(&server.url, &["diff", "r1", "--round", "3"]).await;
    assert_eq!(ran.code, Some(1), "{}", ran.stderr);
    assert!(ran.stderr.contains("hello.py"), "{}", ran.stderr);
    assert!(ran.stdout.is_empty());
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("round1");
    let ran = loopgate(
        &server.url,
        &["checkout", "r1", dest.to_str().unwrap(), "--round", "1"],
    )
    .await;
    assert_eq!(ran.code, Some(1), "{}", ran.stderr);
}

#[tokio::test]
async fn checkout_round_takes_that_rounds_candidate() {
    let server = start(rounds_canned(None)).await;
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("round1");
    let ran = loopgate(
        &server.url,
        &["checkout", "r1", dest.to_str().unwrap(), "--round", "1"],
    )
    .await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(
        std::fs::read_to_string(dest.join("hello.py")).unwrap(),
        "print('v1')\n"
    );
    assert!(dest.join("notes.txt").exists());
    let ran = loopgate(
        &server.url,
        &[
            "checkout",
            "r1",
            root.path().join("x").to_str().unwrap(),
            "--round",
            "2",
        ],
    )
    .await;
    assert_eq!(ran.code, Some(1));
    assert!(
        ran.stderr.contains("produced no candidate"),
        "{}",
        ran.stderr
    );
    let ran = loopgate(
        &server.url,
        &[
            "checkout",
            "r1",
            "/tmp/x",
            "--round",
            "1",
            "--snapshot",
            "abc",
        ],
    )
    .await;
    assert_eq!(ran.code, Some(2), "--round and --snapshot conflict");
}
