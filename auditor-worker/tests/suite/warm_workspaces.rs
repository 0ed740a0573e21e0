//! `[auditor] concurrency` with warm workspaces: concurrent audits of one snapshot each get
//! their own directory (a kept tree is checked out to one audit at a time) and their checks
//! their own private copies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::collections::BTreeMap;
use std::sync::Arc;

use loopgate_auditor::Auditor;
use loopgate_protocol::verdict::CheckVerdict;
use loopgate_snapshot::WorkspaceCache;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_audits_of_one_snapshot_never_share_a_scratch_dir() -> anyhow::Result<()> {
    let env = env().await?;
    let (base, candidate) = freeze_hello(&env.store).await?;
    let work_dir = open_tempdir()?;
    let rendezvous = open_tempdir()?;
    let mut auditor = auditor_on(&env, work_dir.path(), BTreeMap::new());
    let cache = WorkspaceCache::open(&work_dir.path().join(".cache-test"), 1 << 20)?;
    auditor.workspaces = Some(cache.clone());
    let auditor = Arc::new(Auditor::new(auditor));

    // One audit first, so a kept tree of the candidate is there for both to want.
    let warmup = contract(vec![criterion("exists", "test -f hello.py", 10)]);
    auditor
        .audit(&request("run-warm", warmup, &base, &candidate), 1)
        .await?;
    assert_eq!(cache.stats().trees_kept, 1);

    // Each check scribbles on its copy, announces itself and waits (bounded) for the other, so
    // both audits are in flight at once; then it prints where it ran (with `:` for `/`, so
    // the output is not rewritten relative to the copy).
    let check = format!(
        "test \"$(cat hello.py)\" != tampered || exit 3; echo tampered > hello.py; \
         touch {dir}/$$; i=0; while [ $(ls {dir} | wc -l) -lt 2 ] && [ $i -lt 200 ]; do \
         sleep 0.05; i=$((i+1)); done; [ $(ls {dir} | wc -l) -ge 2 ] || exit 4; pwd -P | tr / :",
        dir = rendezvous.path().display()
    );
    let audit = |run: &'static str| {
        let auditor = auditor.clone();
        let req = request(
            run,
            contract(vec![criterion("where", &check, 30)]),
            &base,
            &candidate,
        );
        async move { auditor.audit(&req, 1).await }
    };
    let (one, two) = tokio::join!(audit("run-one"), audit("run-two"));
    let (one, two) = (one?, two?);
    for report in [&one, &two] {
        assert_eq!(report.evidence[0].verdict, CheckVerdict::Pass, "{report:?}");
    }
    let (dir_one, dir_two) = (
        one.evidence[0].output_excerpt.trim(),
        two.evidence[0].output_excerpt.trim(),
    );
    assert_ne!(dir_one, dir_two);
    assert!(!dir_one.starts_with(dir_two) && !dir_two.starts_with(dir_one));
    let stats = cache.stats();
    assert_eq!(
        stats.trees_reused, 1,
        "one audit took the kept tree: {stats:?}"
    );
    assert_eq!(stats.trees_kept, 2, "both trees came back: {stats:?}");
    assert!(dir_is_empty(work_dir.path()), "scratch dirs removed");
    Ok(())
}
