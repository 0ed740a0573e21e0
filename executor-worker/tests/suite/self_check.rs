//! Self-check inside the episode, through the executor's real start-up (the sandbox probe) and
//! the real OpenAI adapter against a stand-in model: `finish` runs the step's blocking checks
//! on a scratch copy of the live workspace; a failing one answers `finish refused: ...`, at most
//! `self_checks` times; at the step cap the agent gets one last turn with the refusal; the
//! copy's side effects never reach the workspace or the candidate; and a self-check runs in
//! exactly the agent's sandbox: it sees what the agent's `shell` sees, and what it prints
//! reaches the model without a key file or the work dir. With the same harness: the first prompt
//! shows the current contents of the small files the step names.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use crate::support;
use std::path::PathBuf;

use anyhow::Context;
use loopgate_executor::{prepare, run_episode, EpisodeEnd, EpisodeEnv};
use loopgate_executor::{ExecutorFile, ExternalInputs};
use loopgate_protocol::contract::Criterion;
use loopgate_protocol::wire::{ExecOutcome, ExecRequest};
use loopgate_snapshot::SnapshotStore;
use loopgate_test_support::{last_message_content, NatsServer, Reply, Script, StandInModel};
use loopgate_transport::{Bus, BusOptions};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// Where the secrets these tests plant live: outside `/tmp` (every sandbox's `/tmp` is fresh
/// anyway) and below directories the check user may search, so hiding them is what keeps them
/// out of reach (under a 0700 home such as the default target dir in `/root/.cache`, the check
/// user could not reach them at all, and the test would prove nothing).
const REACHABLE_TMP: &str = "/var/tmp";

const MODEL: &str = "standin-selfcheck";
const REFUSED: &str = "finish refused:";

struct Harness {
    _nats: NatsServer,
    model: StandInModel,
    store: SnapshotStore,
    env: EpisodeEnv,
    scratch: tempfile::TempDir,
}

impl Harness {
    /// NATS, the stand-in model and the episode environment `prepare` builds (sandbox probed).
    async fn start(script: Script) -> anyhow::Result<Harness> {
        Harness::start_with(script, "").await
    }

    /// As `start`, with `profile_lines` added to the stand-in's model profile.
    async fn start_with(script: Script, profile_lines: &str) -> anyhow::Result<Harness> {
        Harness::start_in(script, profile_lines, tempfile::tempdir()?).await
    }

    /// As `start_with`, with the work dir under `scratch`.
    async fn start_in(
        script: Script,
        profile_lines: &str,
        scratch: tempfile::TempDir,
    ) -> anyhow::Result<Harness> {
        let nats = NatsServer::start().await?;
        let model = StandInModel::start(script).await?;
        // The test is the topology's owner (the manager): workers only wait for it.
        Bus::connect(&nats.url(), "loopgate", BusOptions::default())
            .await?
            .ensure_topology()
            .await?;
        let text = format!(
            "[nats]\nurl = \"{}\"\n[executor]\nwork_dir = \"{}\"\n\
             [models.standin]\nbase_url = \"{}\"\nmodel = \"{MODEL}\"\ntimeout_secs = 10\n{profile_lines}",
            nats.url(),
            scratch.path().join("work").display(),
            model.base_url()
        );
        let settings = ExecutorFile::parse(&text, "test")?.resolve(&ExternalInputs {
            pid: 1,
            temp_dir: std::env::temp_dir(),
            ..ExternalInputs::default()
        })?;
        let ctx = prepare(&settings, &CancellationToken::new())
            .await?
            .context("start-up was cancelled")?;
        Ok(Harness {
            _nats: nats,
            model,
            store: ctx.episode.store.clone(),
            env: ctx.episode.clone(),
            scratch,
        })
    }

    fn work_dir(&self) -> PathBuf {
        self.scratch.path().join("work")
    }

    async fn base(&self, files: &[(&str, &str)]) -> anyhow::Result<String> {
        support::freeze_text_files(&self.store, files).await
    }

    async fn file_in(&self, snapshot: &str, path: &str) -> anyhow::Result<Option<String>> {
        support::file_in(&self.store, snapshot, path).await
    }

    /// The episode's frozen outcome: (candidate, claimed_done, steps, self_check_refusals).
    async fn run(&self, req: &ExecRequest) -> anyhow::Result<(String, bool, u32, u32)> {
        let end = run_episode(req, 1, &self.env).await;
        let EpisodeEnd::Outcome { outcome, .. } = end else {
            anyhow::bail!("no outcome: {end:?}");
        };
        match outcome {
            ExecOutcome::Frozen {
                candidate,
                claimed_done,
                steps,
                self_check_refusals,
                ..
            } => Ok((candidate, claimed_done, steps, self_check_refusals)),
            ExecOutcome::Failed { error } => anyhow::bail!("episode failed: {error}"),
        }
    }

    /// The refusals in the conversation as the model last saw it (tool results and the
    /// step-cap message).
    fn refusals_seen(&self) -> Vec<String> {
        let requests = self.model.requests(MODEL);
        let Some(last) = requests.last() else {
            return Vec::new();
        };
        last["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|m| m["content"].as_str())
            .filter(|text| text.starts_with(REFUSED))
            .map(str::to_string)
            .collect()
    }
}

fn criterion(id: &str, check: &str) -> Criterion {
    Criterion {
        id: id.into(),
        description: String::new(),
        check: Some(check.into()),
        blocking: true,
        timeout_secs: 30,
        source: Default::default(),
        clause: None,
    }
}

/// A step whose contract has `criteria`, with `self_checks` and `max_steps`.
fn request(base: &str, criteria: Vec<Criterion>, self_checks: u32, max_steps: u32) -> ExecRequest {
    let mut req = support::request("run-self-check", base, "standin", 60);
    req.contract.criteria = criteria;
    req.contract.spec_hash = req.contract.compute_hash();
    req.self_checks = self_checks;
    req.max_steps = max_steps;
    req
}

fn write(path: &str, content: &str) -> Reply {
    Reply::tool_call("write_file", json!({"path": path, "content": content}))
}

fn finish() -> Reply {
    Reply::tool_call("finish", json!({"summary": "done"}))
}

const SAYS_HELLO: &str = "grep -qx hello hello.txt";

#[tokio::test]
async fn a_wrong_file_is_refused_at_finish_and_the_fix_is_accepted() -> anyhow::Result<()> {
    let script = Script::new().replies(
        MODEL,
        [
            write("hello.txt", "hullo\n"),
            finish(),
            write("hello.txt", "hello\n"),
            finish(),
        ],
    );
    let h = Harness::start(script).await?;
    let base = h.base(&[]).await?;
    let req = request(&base, vec![criterion("says-hello", SAYS_HELLO)], 2, 8);
    let (candidate, claimed_done, steps, refusals) = h.run(&req).await?;
    assert_eq!((claimed_done, steps, refusals), (true, 4, 1));
    assert_eq!(
        h.file_in(&candidate, "hello.txt").await?.as_deref(),
        Some("hello\n")
    );
    // The refusal answered the first `finish`: the third request ends with it.
    let requests = h.model.requests(MODEL);
    assert_eq!(requests.len(), 4);
    let answer = last_message_content(&requests[2], "tool").unwrap_or_default();
    assert!(answer.starts_with(REFUSED), "{answer}");
    let lines: Vec<&str> = answer.lines().collect();
    assert_eq!(
        lines[0],
        "finish refused: 1 blocking check(s) still fail on your workspace"
    );
    assert!(lines[1].starts_with("- says-hello (exit 1)"), "{answer}");
    // After the refusal the conversation started again from the prompt: the task (with a note
    // naming the file written so far), the refused `finish` and its answer. The refused text
    // left it (the agent writes it anew instead of copying it); before, it was there.
    assert!(requests[1].to_string().contains("hullo"), "{}", requests[1]);
    assert!(
        !requests[2].to_string().contains("hullo"),
        "{}",
        requests[2]
    );
    let roles: Vec<&str> = requests[2]["messages"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["role"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    let task = &requests[2]["messages"][1]["content"];
    assert!(
        task.as_str()
            .is_some_and(|t| t.contains("The workspace keeps what you wrote: `hello.txt`.")),
        "{task}"
    );
    // The accepted `finish` got no tool result: the episode ended there.
    assert_eq!(h.refusals_seen().len(), 1);
    Ok(())
}

#[tokio::test]
async fn self_checks_bound_the_refusals_and_zero_disables_them() -> anyhow::Result<()> {
    // (self_checks, refusals, model requests): the agent never fixes the file.
    let cases = [(0, 0, 2), (1, 1, 3), (2, 2, 4), (3, 3, 5)];
    for (self_checks, want_refusals, want_requests) in cases {
        let script = Script::new()
            .reply(MODEL, write("hello.txt", "hullo\n"))
            .fallback(MODEL, finish());
        let h = Harness::start(script).await?;
        let base = h.base(&[]).await?;
        let req = request(
            &base,
            vec![criterion("says-hello", SAYS_HELLO)],
            self_checks,
            10,
        );
        let (_, claimed_done, steps, refusals) = h.run(&req).await?;
        assert_eq!(
            (claimed_done, refusals, h.model.request_count(MODEL)),
            (true, want_refusals, want_requests),
            "self_checks = {self_checks}"
        );
        assert_eq!(steps as usize, want_requests, "self_checks = {self_checks}");
        // Each refusal restarts the conversation: the last request holds only the latest one,
        // and it does not grow with the refusals.
        assert_eq!(h.refusals_seen().len(), want_refusals.min(1) as usize);
        let requests = h.model.requests(MODEL);
        let sent = requests
            .last()
            .and_then(|r| r["messages"].as_array().map(Vec::len));
        // (Without the restarts the third refusal's request would hold 10.)
        assert_eq!(sent, Some(4), "self_checks = {self_checks}");
    }
    Ok(())
}

#[tokio::test]
async fn the_step_cap_gets_one_last_turn_with_the_refusal() -> anyhow::Result<()> {
    // (self_checks, what the agent writes before the cap, steps, refusals, claimed_done,
    //  hello.txt in the candidate)
    let cases = [
        (2, "hullo\n", 3, 1, true, "hello\n"),
        (0, "hullo\n", 2, 0, false, "hullo\n"),
        (2, "hello\n", 2, 0, false, "hello\n"),
    ];
    for (self_checks, first, want_steps, want_refusals, want_done, want_file) in cases {
        let written = first.to_string();
        // Writes until the step cap; told it is refused there, fixes the file and finishes.
        let agent = Reply::dynamic(move |req: &Value| {
            let last = req["messages"].as_array().and_then(|m| m.last()).cloned();
            let refused = last.is_some_and(|m| {
                m["role"] == "user" && m["content"].as_str().unwrap_or("").starts_with(REFUSED)
            });
            if refused {
                Reply::ToolCalls(vec![
                    (
                        "write_file".into(),
                        json!({"path": "hello.txt", "content": "hello\n"}),
                    ),
                    ("finish".into(), json!({"summary": "fixed"})),
                ])
            } else {
                // Not the same call twice in a row (a repeated write self-checks at once: see
                // a_repeated_write_runs_the_self_check_...); the same file either way.
                let turn = req["messages"].as_array().map_or(0, Vec::len);
                let path = if turn % 4 == 2 {
                    "hello.txt"
                } else {
                    "./hello.txt"
                };
                write(path, &written)
            }
        });
        let h = Harness::start(Script::new().fallback(MODEL, agent)).await?;
        let base = h.base(&[]).await?;
        let req = request(
            &base,
            vec![criterion("says-hello", SAYS_HELLO)],
            self_checks,
            2,
        );
        let (candidate, claimed_done, steps, refusals) = h.run(&req).await?;
        let case = format!("self_checks = {self_checks}, first = {first:?}");
        assert_eq!(
            (steps, refusals, claimed_done),
            (want_steps, want_refusals, want_done),
            "{case}"
        );
        assert_eq!(
            h.file_in(&candidate, "hello.txt").await?.as_deref(),
            Some(want_file),
            "{case}"
        );
        assert_eq!(h.model.request_count(MODEL), want_steps as usize, "{case}");
    }
    Ok(())
}

#[tokio::test]
async fn the_scratch_copy_leaves_the_workspace_and_the_candidate_untouched() -> anyhow::Result<()> {
    // The check writes a cache file and appends to hello.txt in its copy, and shows whether an
    // ignored path (not frozen, so not audited) was copied: exit 5 = it was not.
    let check = "echo cache > cache.txt; mkdir -p .pytest_cache; echo x >> hello.txt; \
                 if test -e build/out.txt; then exit 6; fi; exit 5";
    let script = Script::new().replies(
        MODEL,
        [
            write("hello.txt", "hello\n"),
            write("build/out.txt", "built\n"),
            finish(),
            Reply::tool_call("read_file", json!({"path": "hello.txt"})),
            Reply::tool_call("list_dir", json!({})),
            finish(),
        ],
    );
    let h = Harness::start(script).await?;
    let base = h.base(&[("README.md", "readme\n")]).await?;
    let mut req = request(&base, vec![criterion("side-effects", check)], 1, 10);
    req.ignore = vec!["build/".into()];
    let (candidate, claimed_done, _, refusals) = h.run(&req).await?;
    assert_eq!((claimed_done, refusals), (true, 1));
    let refusal = &h.refusals_seen()[0];
    assert!(
        refusal
            .lines()
            .any(|l| l.starts_with("- side-effects (exit 5)")),
        "{refusal}"
    );
    // The live workspace, as the agent saw it after the refusal.
    let requests = h.model.requests(MODEL);
    assert_eq!(
        last_message_content(&requests[4], "tool").as_deref(),
        Some("hello\n")
    );
    let listing = last_message_content(&requests[5], "tool").unwrap_or_default();
    assert!(
        !listing.contains("cache.txt") && !listing.contains(".pytest_cache"),
        "{listing}"
    );
    // The candidate: the agent's files, none of the check's.
    let manifest = h.store.manifest(&candidate).await?;
    let paths: Vec<&str> = manifest.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["README.md", "hello.txt"]);
    assert_eq!(
        h.file_in(&candidate, "hello.txt").await?.as_deref(),
        Some("hello\n")
    );
    // Nothing is left behind in the work dir (episode dir and self-check scratch removed).
    assert_eq!(support::work_dir_entries(&h.work_dir())?, 0);
    Ok(())
}

/// A fresh word for secrets and canaries.
fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{nanos:x}{:x}", std::process::id())
}

/// A model API key file as a Kubernetes Secret volume mounts it by default (mode 0644), outside
/// `/tmp` (which every sandbox replaces anyway), named in the stand-in's profile.
fn world_readable_key_file() -> anyhow::Result<(tempfile::TempDir, PathBuf, String)> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir_in(REACHABLE_TMP)?;
    let key = format!("sk-selfcheck-{}", unique());
    let path = dir.path().join("openai-api-key");
    std::fs::write(&path, &key)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    Ok((dir, path, key))
}

#[tokio::test]
async fn a_self_check_sees_exactly_what_the_agents_shell_sees() -> anyhow::Result<()> {
    let (_keys, key_file, key) = world_readable_key_file()?;
    // Who runs it, which network and processes it sees, what environment it gets, and what
    // of a hidden key file.
    let report = format!(
        "echo \"uid=$(id -u) net=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ,) \
         pid1=$(cat /proc/1/comm) env=$(env | cut -d= -f1 | grep -v -e '^_$' -e '^PWD$' -e '^SHLVL$' \
         -e '^OLDPWD$' -e '^LOOPGATE_BROWSE_RECORD$' | sort | tr '\\n' ,) key=[$(cat {} 2>&1)]\"; exit 3",
        key_file.display()
    );
    let script = Script::new()
        .reply(
            MODEL,
            Reply::tool_call("shell", json!({"command": report.clone()})),
        )
        .fallback(MODEL, finish());
    let profile = format!("api_key_file = \"{}\"\n", key_file.display());
    let h = Harness::start_with(script, &profile).await?;
    // One definition: the episodes' agent sandbox is the self-checks' sandbox.
    assert_eq!(h.env.self_check.agent, h.env.agent);
    assert!(
        h.env.agent.sandbox.hides(&key_file),
        "{:?}",
        h.env.agent.sandbox
    );

    let base = h.base(&[]).await?;
    let (_, _, _, refusals) = h
        .run(&request(&base, vec![criterion("probe", &report)], 1, 4))
        .await?;
    assert_eq!(refusals, 1);
    let requests = h.model.requests(MODEL);
    let from_shell = last_message_content(&requests[1], "tool")
        .and_then(|t| {
            t.strip_prefix("exit code: 3\n")
                .map(|l| l.trim().to_string())
        })
        .context("the shell's report")?;
    let refusal = h.refusals_seen().remove(0);
    let from_self_check = refusal
        .lines()
        .find_map(|l| l.strip_prefix("- probe (exit 3): "))
        .context("the self-check's report")?
        .trim()
        .to_string();
    assert_eq!(from_self_check, from_shell);
    // Hidden: an empty file (or one that cannot be opened: a device node bound in a user
    // namespace), never the key.
    assert!(
        !refusal.contains(&key) && !from_shell.contains(&key),
        "{refusal}"
    );
    if h.env.agent.sandbox.is_sandboxed() {
        // The built-in shell's default: no network; bubblewrap is pid 1.
        assert!(from_shell.contains("net=lo,"), "{from_shell}");
        assert!(from_shell.contains("pid1=bwrap"), "{from_shell}");
    } else {
        eprintln!("SKIP the sandboxed comparison: agents run unsandboxed here");
    }
    assert!(from_shell.contains("env=HOME,LANG,PATH,"), "{from_shell}");
    Ok(())
}

/// Issue 38 item 1: the artifact the agent wrote is what the self-check runs, and a failing
/// self-check's output goes back to the model as the `finish` tool result. An artifact that
/// prints a profile's `api_key_file` (mode 0644, outside /tmp) and lists the executor's work dir
/// gets neither into what the model reads.
#[tokio::test]
async fn a_self_check_cannot_show_the_model_a_key_file_or_the_work_dir() -> anyhow::Result<()> {
    let (_keys, key_file, key) = world_readable_key_file()?;
    // A work dir outside /tmp (every sandbox's /tmp is fresh anyway), as in a pod.
    let scratch = tempfile::tempdir_in(REACHABLE_TMP)?;
    let work_dir = scratch.path().join("work");
    let artifact = format!(
        "echo listing:; ls -A {work}; echo key:; cat {key}; exit 1\n",
        work = work_dir.display(),
        key = key_file.display()
    );
    let script = Script::new()
        .reply(MODEL, write("leak.sh", &artifact))
        .fallback(MODEL, finish());
    let profile = format!("api_key_file = \"{}\"\n", key_file.display());
    let h = Harness::start_in(script, &profile, scratch).await?;
    // Another run's tree beside this episode's.
    let canary = format!("other-run-{}", unique());
    std::fs::create_dir_all(h.work_dir().join(&canary))?;

    let base = h.base(&[]).await?;
    let (_, _, _, refusals) = h
        .run(&request(&base, vec![criterion("leak", "sh leak.sh")], 1, 4))
        .await?;
    assert_eq!(refusals, 1);
    let refusal = h.refusals_seen().remove(0);
    // The artifact ran and failed, and its output reached the model ...
    assert!(
        refusal.contains("- leak (exit 1): listing:") && refusal.contains("key:"),
        "{refusal}"
    );
    // ... without the key or anything of the work dir but the check's own directory.
    let everything: String = h
        .model
        .requests(MODEL)
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert!(
        !everything.contains(&key),
        "the key reached the model: {refusal}"
    );
    assert!(
        !everything.contains(&canary),
        "the work dir's listing reached the model: {refusal}"
    );
    // Nor this run's own trees: the warm-workspace cache and the episode's directory.
    assert!(!everything.contains(".cache-executor"), "{refusal}");
    assert!(!everything.contains("run-self-check-r1"), "{refusal}");
    Ok(())
}

#[tokio::test]
async fn a_repeated_write_runs_the_self_check_and_names_the_misplaced_file() -> anyhow::Result<()> {
    // The demo's failure: the agent writes src/hello.py, then repeats the write instead of
    // calling finish. The repeat runs the self-check at once; its refusal says where the
    // check looks for the file. A third identical write gets the same findings without a new
    // check; the fix (the file at the root), repeated, passes and ends the episode.
    let check = "test \"$(cat hello.txt)\" = hello";
    let script = Script::new().replies(
        MODEL,
        [
            write("src/hello.txt", "hello"),
            write("src/hello.txt", "hello"),
            write("src/hello.txt", "hello"),
            write("hello.txt", "hello"),
            write("hello.txt", "hello"),
        ],
    );
    let h = Harness::start(script).await?;
    let base = h.base(&[]).await?;
    let req = request(&base, vec![criterion("says-hello", check)], 2, 8);
    let (candidate, claimed_done, steps, refusals) = h.run(&req).await?;
    assert_eq!((claimed_done, steps, refusals), (true, 5, 1));
    assert_eq!(
        h.file_in(&candidate, "hello.txt").await?.as_deref(),
        Some("hello")
    );
    let requests = h.model.requests(MODEL);
    assert_eq!(requests.len(), 5);
    let first_write = last_message_content(&requests[1], "tool").unwrap_or_default();
    assert!(first_write.starts_with("wrote 5 bytes"), "{first_write}");
    let repeat = last_message_content(&requests[2], "tool").unwrap_or_default();
    assert!(repeat.contains("You repeated the same write"), "{repeat}");
    assert!(
        repeat.contains("finish refused: 1 blocking check(s)"),
        "{repeat}"
    );
    assert!(
        repeat.contains("needs `hello.txt` there, but the workspace has `src/hello.txt`"),
        "{repeat}"
    );
    // The third write: the same findings again (no second check: still one refusal).
    let again = last_message_content(&requests[3], "tool").unwrap_or_default();
    assert!(
        again.contains("finish refused: 1 blocking check(s)"),
        "{again}"
    );
    Ok(())
}

#[tokio::test]
async fn an_agent_that_keeps_repeating_a_refused_write_ends_its_episode() -> anyhow::Result<()> {
    // The 1.5B's loop: the same wrong write over and over. The second write self-checks and is
    // refused, the third gets those findings again, the fourth ends the episode (not done),
    // instead of spending every step left on the same bytes.
    let script = Script::new().fallback(MODEL, write("hello.txt", "hullo\n"));
    let h = Harness::start(script).await?;
    let base = h.base(&[]).await?;
    let req = request(&base, vec![criterion("says-hello", SAYS_HELLO)], 2, 12);
    let end = run_episode(&req, 1, &h.env).await;
    let EpisodeEnd::Outcome {
        outcome:
            ExecOutcome::Frozen {
                summary,
                claimed_done,
                steps,
                self_check_refusals,
                ..
            },
        ..
    } = end
    else {
        anyhow::bail!("no frozen outcome: {end:?}");
    };
    assert_eq!((claimed_done, steps, self_check_refusals), (false, 4, 1));
    assert!(summary.starts_with("stopped early"), "{summary}");
    assert_eq!(h.model.request_count(MODEL), 4);
    Ok(())
}

#[tokio::test]
async fn refusals_and_retried_failures_raise_the_temperature() -> anyhow::Result<()> {
    // The profile's 0.2 for the first try; +0.3 per refusal, and from the start when the step
    // retries a criterion the last audit failed. Without a profile temperature none is sent.
    let cases: [(&str, bool, [Option<f64>; 3]); 3] = [
        (
            "temperature = 0.2\n",
            false,
            [Some(0.2), Some(0.5), Some(0.8)],
        ),
        (
            "temperature = 0.2\n",
            true,
            [Some(0.5), Some(0.8), Some(1.0)],
        ),
        ("", true, [None, None, None]),
    ];
    for (profile, retrying, want) in cases {
        let script = Script::new().replies(
            MODEL,
            [
                write("hello.txt", "hullo\n"),
                finish(),
                finish(),
                write("hello.txt", "hello\n"),
                finish(),
            ],
        );
        let h = Harness::start_with(script, profile).await?;
        let base = h.base(&[]).await?;
        let mut req = request(&base, vec![criterion("says-hello", SAYS_HELLO)], 2, 8);
        if retrying {
            req.feedback.failing = vec![loopgate_protocol::wire::FailingCheck {
                criterion: "says-hello".into(),
                check: Some(SAYS_HELLO.into()),
                verdict: loopgate_protocol::verdict::CheckVerdict::Fail,
                exit_code: Some(1),
                output_excerpt: String::new(),
            }];
        }
        let (_, claimed_done, _, refusals) = h.run(&req).await?;
        assert_eq!(
            (claimed_done, refusals),
            (true, 2),
            "{profile:?} {retrying}"
        );
        let temps: Vec<Option<f64>> = h
            .model
            .requests(MODEL)
            .iter()
            .map(|r| {
                r["temperature"]
                    .as_f64()
                    .map(|t| (t * 100.0).round() / 100.0)
            })
            .collect();
        // requests: before the first finish (0 refusals), after one, after two (3 of them).
        let per_request = [want[0], want[0], want[1], want[2], want[2]];
        assert_eq!(temps, per_request, "{profile:?} retrying = {retrying}");
    }
    Ok(())
}

#[tokio::test]
async fn the_first_prompt_shows_the_small_files_the_step_names() -> anyhow::Result<()> {
    let h = Harness::start(Script::new().replies(MODEL, [finish()])).await?;
    let solution = "def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n";
    let big = "x = 1\n".repeat(2000);
    let base = h
        .base(&[
            ("solution.py", solution),
            ("big.py", &big),
            ("notes.md", "n\n"),
        ])
        .await?;
    let mut req = request(&base, vec![criterion("ok", "true")], 0, 2);
    req.increment.objective = "Complete the function add in solution.py (see big.py)".into();
    h.run(&req).await?;
    let first = &h.model.requests(MODEL)[0];
    let prompt = last_message_content(first, "user").unwrap_or_default();
    assert!(
        prompt.contains(&format!(
            "Current contents of solution.py:\n```\n{solution}```"
        )),
        "{prompt}"
    );
    // Named but too big to show whole; not named in a workspace of three files: shown.
    assert!(!prompt.contains("Current contents of big.py"), "{prompt}");
    assert!(prompt.contains("Current contents of notes.md"), "{prompt}");
    Ok(())
}

#[tokio::test]
async fn several_checks_of_a_big_workspace_each_get_a_private_copy() -> anyhow::Result<()> {
    // 250 files: worth layering, so (where the sandbox can) both checks share one copy as the
    // lower layer of their own copies. Each must still see only its own writes.
    let h = Harness::start(Script::new().replies(MODEL, [finish()])).await?;
    let names: Vec<String> = (0..250).map(|i| format!("src/f{i}.txt")).collect();
    let files: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "x\n")).collect();
    let base = h.base(&files).await?;
    let writes = criterion("writes", "echo mine > side.txt && test -f src/f249.txt");
    let sees_none = criterion(
        "private",
        "test ! -e side.txt && test $(find src -type f | wc -l) -eq 250",
    );
    let req = request(&base, vec![writes, sees_none], 2, 2);
    let (candidate, claimed_done, _, refusals) = h.run(&req).await?;
    assert_eq!(
        (claimed_done, refusals),
        (true, 0),
        "both checks passed at finish"
    );
    assert_eq!(h.file_in(&candidate, "side.txt").await?, None);
    Ok(())
}
