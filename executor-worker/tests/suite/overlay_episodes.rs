//! Overlay episodes against a real nats-server and this host's real agent sandbox: a hostile
//! CLI agent writes through every path it can find towards the base's tree (the overlay's
//! lower layer), which must stay exactly the base, as the next episode on it sees; and the
//! fallback (no overlays) still materializes and freezes by copying. Each test says SKIP where
//! bubblewrap or overlay mounts are not available.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::support::{self, agent_profile, request, script};
use loopgate_checks::{hidden_paths, probe_agent_sandbox, SandboxSettings};
use loopgate_executor::{
    run_episode, AgentIsolationEnv, AgentNetworkPolicy, EpisodeEnd, EpisodeEnv, SelfCheckEnv,
    ToolLimits,
};
use loopgate_protocol::wire::ExecOutcome;
use loopgate_snapshot::{overlay, FreezeRules, SnapshotStore, WorkspaceCache};
use loopgate_test_support::NatsServer;
use loopgate_transport::{Bus, BusOptions};

/// Stand-in Claude Code that goes for the lower layer: it finds the lower directory in its
/// mount table and writes there directly, through a symlink, through `..`, through
/// `/proc/self/root`, remounts and unmounts its workspace, and changes every base file every
/// way it can (append, truncate, chmod, touch, hard link, rename, delete, a directory's
/// removal); then makes its one honest change.
const HOSTILE: &str = r#"
lower=$(grep -o 'lowerdir=[^, ]*/trees/[^, ]*' /proc/self/mountinfo | head -n 1 | cut -d= -f2)
echo "$lower" > lower-seen.txt
for target in "$lower" "/proc/self/root$lower" "../$(basename "$lower")" ../..; do
  echo evil > "$target/README.md" 2>/dev/null
  echo evil > "$target/planted.txt" 2>/dev/null
done
ln -s "$lower/src/a.txt" through-link && { echo evil > through-link; rm -f through-link; } 2>/dev/null
mount -o remount,rw . 2>/dev/null
umount -l . 2>/dev/null
mount -t overlay overlay -o "lowerdir=$PWD,upperdir=/tmp/u,workdir=/tmp/w" "$lower" 2>/dev/null
echo appended >> README.md
: > exec.sh
chmod 0777 dir/b.txt
touch -d 2001-01-01 dir/c.txt
ln dir/c.txt hard-link.txt && echo via-link >> hard-link.txt
mv dir/d.txt renamed.txt
rm src/a.txt
rm -rf deep
echo hello > hello.txt
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","num_turns":1,"total_cost_usd":0,"usage":{"input_tokens":1,"output_tokens":1}}'
"#;

/// Stand-in Claude Code that changes nothing (the next episode on the same base).
const IDLE: &str = r#"
echo '{"type":"result","subtype":"success","is_error":false,"result":"nothing to do","num_turns":1,"total_cost_usd":0,"usage":{"input_tokens":1,"output_tokens":1}}'
"#;

const BASE: &[(&str, &str)] = &[
    ("README.md", "# project\n"),
    ("exec.sh", "#!/bin/sh\necho run\n"),
    ("src/a.txt", "a\n"),
    ("dir/b.txt", "b\n"),
    ("dir/c.txt", "c\n"),
    ("dir/d.txt", "d\n"),
    ("deep/er/e.txt", "e\n"),
];

struct Harness {
    _nats: NatsServer,
    store: SnapshotStore,
    scratch: tempfile::TempDir,
    env: EpisodeEnv,
}

impl Harness {
    /// The real agent sandbox and a warm cache; `None` (said) where the sandbox is missing.
    async fn start() -> anyhow::Result<Option<Harness>> {
        let nats = NatsServer::start().await?;
        let bus = Bus::connect(&nats.url(), "loopgate", BusOptions::default()).await?;
        bus.ensure_topology().await?;
        let store = SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout()).await?;
        let scratch = tempfile::tempdir()?;
        // The check user (when the tests run as root) must be able to reach the work dir.
        std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o711))?;
        for dir in ["work", "bin"] {
            std::fs::create_dir_all(scratch.path().join(dir))?;
        }
        let work_dir = scratch.path().join("work").canonicalize()?;
        let hidden = hidden_paths(&[], scratch.path());
        let sandbox =
            match probe_agent_sandbox(&SandboxSettings::default(), &work_dir, hidden).await {
                Ok(sandbox) => sandbox,
                Err(err) => {
                    eprintln!("SKIP overlay episodes: no agent sandbox: {err}");
                    return Ok(None);
                }
            };
        let workspaces = WorkspaceCache::open_for_worker(&work_dir, "exec-1", 1 << 26);
        let env = EpisodeEnv {
            store: store.clone(),
            work_dir,
            tools: ToolLimits::default(),
            models: BTreeMap::new(),
            agents: BTreeMap::new(),
            self_check: SelfCheckEnv::unisolated("test"),
            agent: AgentIsolationEnv {
                sandbox: Arc::new(sandbox),
                network: AgentNetworkPolicy::default(),
            },
            workspaces,
            overlays: false,
        };
        Ok(Some(Harness {
            _nats: nats,
            store,
            scratch,
            env,
        }))
    }

    fn add_agent(&mut self, name: &str, body: &str) -> anyhow::Result<()> {
        let command = script(&self.scratch.path().join("bin"), name, body)?;
        let profile = agent_profile(name, "claude_code", &command, &[])?;
        self.env.agents.insert(name.to_string(), profile);
        Ok(())
    }

    /// Every tree the cache keeps, as the snapshot each holds (frozen without any cache).
    async fn kept_trees(&self) -> anyhow::Result<Vec<String>> {
        let cache = self.env.workspaces.as_ref().unwrap();
        let mut ids = Vec::new();
        let trees: Vec<PathBuf> = std::fs::read_dir(cache.root().join("trees"))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        for tree in trees {
            ids.push(self.store.freeze(&tree, &FreezeRules::default()).await?.id);
        }
        Ok(ids)
    }

    async fn frozen(&self, run: &str, base: &str, agent: &str) -> anyhow::Result<String> {
        let end = run_episode(&request(run, base, agent, 30), 1, &self.env).await;
        let EpisodeEnd::Outcome {
            outcome: ExecOutcome::Frozen { candidate, .. },
            ..
        } = end
        else {
            panic!("{end:?}")
        };
        Ok(candidate)
    }
}

fn leftovers(work_dir: &Path) -> Vec<String> {
    std::fs::read_dir(work_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with(".cache-"))
        .collect()
}

/// The hostile agent changes only its own upper layer: the candidate has its changes, the
/// base's tree in the cache is still exactly the base (and the next episode on it sees the
/// base), and nothing is left mounted or on disk.
#[tokio::test]
async fn a_hostile_agent_cannot_write_the_lower_layer() -> anyhow::Result<()> {
    let Some(mut h) = Harness::start().await? else {
        return Ok(());
    };
    if let Err(why) = overlay::probe(&h.env.work_dir) {
        assert!(
            !rustix::process::geteuid().is_root(),
            "root cannot mount: {why}"
        );
        eprintln!("SKIP overlay episodes: {why}");
        return Ok(());
    }
    h.env.overlays = true;
    h.add_agent("hostile", HOSTILE)?;
    h.add_agent("idle", IDLE)?;
    let base = support::freeze_text_files(&h.store, BASE).await?;

    let candidate = h.frozen("run-hostile", &base, "hostile").await?;
    // The lower layer is still exactly the base.
    assert_eq!(h.kept_trees().await?, vec![base.clone()]);
    let file = |path: &'static str| {
        let (store, candidate) = (h.store.clone(), candidate.clone());
        async move { support::file_in(&store, &candidate, path).await }
    };
    // It really looked: the lower layer's path was in its mount table.
    let seen = file("lower-seen.txt").await?.unwrap_or_default();
    assert!(seen.contains("/trees/"), "lower not seen: {seen:?}");
    assert_eq!(
        file("README.md").await?.as_deref(),
        Some("# project\nappended\n")
    );
    assert_eq!(file("exec.sh").await?.as_deref(), Some(""));
    assert_eq!(
        file("hard-link.txt").await?.as_deref(),
        Some("c\nvia-link\n")
    );
    assert_eq!(file("renamed.txt").await?.as_deref(), Some("d\n"));
    assert_eq!(file("hello.txt").await?.as_deref(), Some("hello\n"));
    for gone in ["src/a.txt", "dir/d.txt", "deep/er/e.txt", "planted.txt"] {
        assert_eq!(file(gone).await?, None, "{gone}");
    }
    let manifest = h.store.manifest(&candidate).await?;
    assert_eq!(manifest.get("dir/b.txt").map(|e| e.mode), Some(0o755));

    // And it is what the next episode on the same base gets.
    assert_eq!(h.frozen("run-idle", &base, "idle").await?, base);
    assert_eq!(h.kept_trees().await?, vec![base.clone()]);
    assert!(
        leftovers(&h.env.work_dir).is_empty(),
        "{:?}",
        leftovers(&h.env.work_dir)
    );
    Ok(())
}

/// Without overlays (here: switched off, as a worker that cannot mount them runs) an episode
/// copies its base into its directory and freezes it, as before.
#[tokio::test]
async fn without_overlays_episodes_copy_their_base() -> anyhow::Result<()> {
    let Some(mut h) = Harness::start().await? else {
        return Ok(());
    };
    h.add_agent("hostile", HOSTILE)?;
    let base = support::freeze_text_files(&h.store, BASE).await?;
    let candidate = h.frozen("run-copy", &base, "hostile").await?;
    assert_eq!(
        support::file_in(&h.store, &candidate, "README.md")
            .await?
            .as_deref(),
        Some("# project\nappended\n")
    );
    // No mount: the agent saw no lower layer of its own. (Its mount table may show another
    // overlay on this host, such as an e2e stack's executor running beside this test.)
    let seen = support::file_in(&h.store, &candidate, "lower-seen.txt")
        .await?
        .unwrap_or_default();
    let own = h.scratch.path().to_string_lossy().into_owned();
    assert!(!seen.contains(&own), "an overlay of its own: {seen:?}");
    // The copy went back to the cache as a kept tree holding the candidate (re-verified when
    // reused, since the agent had its hands on it).
    assert_eq!(h.kept_trees().await?, vec![candidate]);
    assert!(leftovers(&h.env.work_dir).is_empty());
    Ok(())
}
