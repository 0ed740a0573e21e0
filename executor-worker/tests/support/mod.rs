//! Shared by the executor's integration tests: exec requests, base snapshots, and stand-in CLI
//! agents (small shell scripts that speak an agent's JSON-lines output format).

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use loopgate_executor::{AgentProfile, AgentProfileConfig};
use loopgate_protocol::contract::Contract;
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::wire::{ExecRequest, Increment};
use loopgate_snapshot::SnapshotStore;

pub fn request(run_id: &str, base: &str, profile: &str, episode_secs: u64) -> ExecRequest {
    let mut contract = Contract {
        goal: "write hello.txt".into(),
        criteria: Vec::new(),
        protected_paths: Vec::new(),
        rubric: None,
        writable_paths: Vec::new(),
        spec_hash: String::new(),
    };
    contract.spec_hash = contract.compute_hash();
    ExecRequest {
        attempt: 1,
        run_id: run_id.into(),
        generation: 1,
        round: 1,
        capability: Capability::Cli,
        contract,
        increment: Increment {
            objective: "create hello.txt".into(),
            instructions: String::new(),
            acceptance_checks: Vec::new(),
            write_scope: Vec::new(),
            goal_clauses: Vec::new(),
        },
        base_snapshot: base.into(),
        executor_profile: profile.into(),
        episode_secs,
        max_steps: 8,
        start_by_ms: None,
        ignore: Vec::new(),
        episode: Default::default(),
        feedback: Default::default(),
        self_checks: loopgate_common::budget::DEFAULT_SELF_CHECKS,
        max_tokens: None,
        gui: None,
    }
}

/// A snapshot of these text files (mode 0644); its id.
pub async fn freeze_text_files(
    store: &SnapshotStore,
    files: &[(&str, &str)],
) -> anyhow::Result<String> {
    let files = files
        .iter()
        .map(|(p, c)| (p.to_string(), 0o644, c.as_bytes().to_vec()))
        .collect();
    Ok(store.freeze_files(files).await?.id)
}

/// Content of `path` in snapshot `id`, read back through the store (hash-checked).
pub async fn file_in(
    store: &SnapshotStore,
    id: &str,
    path: &str,
) -> anyhow::Result<Option<String>> {
    let manifest = store.manifest(id).await?;
    let Some(entry) = manifest.get(path) else {
        return Ok(None);
    };
    Ok(Some(String::from_utf8(store.blob(&entry.sha256).await?)?))
}

/// Writes an executable `/bin/sh` script `name` into `dir`.
pub fn script(dir: &Path, name: &str, body: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n"))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// An agent profile for `command`, with fixed env values (e.g. where the script reports).
pub fn agent_profile(
    name: &str,
    kind: &str,
    command: &Path,
    set_env: &[(&str, String)],
) -> anyhow::Result<AgentProfile> {
    let set_env: String = set_env
        .iter()
        .map(|(k, v)| format!("{k} = {v:?}\n"))
        .collect();
    let text = format!(
        "kind = {kind:?}\ncommand = {:?}\nenv = [\"PASSED_THROUGH\"]\n[set_env]\n{set_env}",
        command.display().to_string()
    );
    let config: AgentProfileConfig = toml::from_str(&text)?;
    Ok(config.resolve(name, &|var| {
        (var == "PASSED_THROUGH").then(|| "yes".to_string())
    })?)
}

/// Stand-in Claude Code that writes hello.txt and prints `secret` and its passed-through
/// `$PASSED_THROUGH` in a message, a line that is not JSON, its stderr and its final result.
pub fn claude_leaking(secret: &str) -> String {
    format!(
        r#"
printf 'hello\n' > hello.txt
echo '{{"type":"assistant","message":{{"content":[{{"type":"text","text":"using {secret} and '"$PASSED_THROUGH"'"}}]}}}}'
echo "not JSON, key $PASSED_THROUGH"
echo "stderr: {secret} $PASSED_THROUGH" >&2
echo '{{"type":"result","subtype":"success","is_error":false,"result":"Done; the keys were {secret} and '"$PASSED_THROUGH"'","num_turns":1}}'
"#
    )
}

/// Stand-in Claude Code: writes hello.txt, records its args, env and HOME, prints
/// stream-json and a successful result.
pub const CLAUDE_SUCCESS: &str = r#"
printf '%s\n' "$@" > "$REPORT_DIR/args"
env | cut -d= -f1 | sort > "$REPORT_DIR/env"
echo "$HOME" > "$REPORT_DIR/home"
pwd > "$REPORT_DIR/pwd"
printf 'hello\n' > hello.txt
mkdir -p .claude && echo '{}' > .claude/settings.local.json
echo '{"type":"system","subtype":"init","session_id":"s1","tools":["Write"]}'
echo '{"type":"assistant","message":{"content":[{"type":"text","text":"Writing hello.txt"},{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"hello.txt"}}]}}'
echo '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}'
echo 'a line that is not JSON'
echo '{"type":"result","subtype":"success","is_error":false,"result":"Created hello.txt","num_turns":2,"total_cost_usd":0.0042,"usage":{"input_tokens":1200,"cache_read_input_tokens":300,"output_tokens":80}}'
"#;

/// Stand-in Codex CLI failing before it changed anything.
pub const CODEX_FAILURE: &str = r#"
echo '{"type":"thread.started","thread_id":"th_1"}'
echo '{"type":"turn.started"}'
echo '{"type":"error","message":"Reconnecting... 1/5"}'
echo '{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: invalid api key"}}'
echo 'codex: giving up' >&2
exit 1
"#;

/// Stand-in OpenCode that writes a file, starts a step, then hangs; a background child would
/// touch `$MARKER` two seconds later unless its process group is killed.
pub const OPENCODE_HANG: &str = r#"
printf 'partial\n' > partial.txt
echo '{"type":"step_start","sessionID":"ses_1","part":{"type":"step-start"}}'
echo '{"type":"text","sessionID":"ses_1","part":{"type":"text","text":"Working on it"}}'
(sleep 2; touch "$MARKER") &
sleep 60
"#;

/// Stand-in OpenCode that succeeds quickly.
pub const OPENCODE_SUCCESS: &str = r#"
printf 'hello\n' > hello.txt
echo '{"type":"step_start","part":{"type":"step-start"}}'
echo '{"type":"tool_use","part":{"type":"tool","tool":"write","callID":"c1","state":{"status":"completed"}}}'
echo '{"type":"step_finish","part":{"type":"step-finish","reason":"tool-calls","cost":0.001,"tokens":{"input":400,"output":30,"cache":{"read":0,"write":0}}}}'
echo '{"type":"step_start","part":{"type":"step-start"}}'
echo '{"type":"text","part":{"type":"text","text":"Wrote hello.txt"}}'
echo '{"type":"step_finish","part":{"type":"step-finish","reason":"stop","cost":0.002,"tokens":{"input":500,"output":10}}}'
"#;

/// Entries of a work dir besides the worker's warm-workspace cache (`.cache-<worker>`), which
/// outlives episodes on purpose.
pub fn work_dir_entries(dir: &std::path::Path) -> std::io::Result<usize> {
    Ok(std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with(".cache-"))
        .count())
}
