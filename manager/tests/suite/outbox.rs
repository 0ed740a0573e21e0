//! The outbox in the run store: effects stored with the record, claimed by age, forgotten
//! once published; and the log's bounds.

use std::time::Duration;

use anyhow::Result;
use loopgate_manager::run_store::{CasOutcome, CasWrite};

use crate::{bounded, redis_store};

fn effects(ids: &[&str]) -> Vec<(String, String)> {
    ids.iter()
        .map(|id| (id.to_string(), format!("{{\"id\":\"{id}\"}}")))
        .collect()
}

#[tokio::test]
async fn effects_stored_with_the_record_stay_pending_until_published() -> Result<()> {
    bounded(async {
        let (_server, store) = redis_store().await?;
        let first = effects(&["r1:1:decide:1"]);
        assert!(
            store
                .create_with_effects("r1", "{}", "queued", 1_000, None, &[], &first)
                .await?
        );
        // Not yet old enough at 3_000 with a 3 s age: nothing is claimed.
        assert!(store.claim_pending(0, 3_000, 10).await?.is_empty());
        assert_eq!(store.claim_pending(1_000, 3_000, 10).await?, ["r1"]);
        // A claim moves the run's score to the claim time: nobody else takes it until then.
        assert!(store.claim_pending(2_999, 3_100, 10).await?.is_empty());
        assert_eq!(store.pending_effects("r1").await?, first);

        // A transition adds its effects beside the unpublished ones.
        let write = CasWrite {
            expected_version: 1,
            record: "{\"v\":2}".into(),
            effects: effects(&["r1:1:1:exec"]),
            now_ms: 4_000,
            ..CasWrite::default()
        };
        assert!(matches!(
            store.compare_and_set("r1", write).await?,
            CasOutcome::Applied { new_version: 2 }
        ));
        let mut pending: Vec<String> = store
            .pending_effects("r1")
            .await?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        pending.sort();
        assert_eq!(pending, ["r1:1:1:exec", "r1:1:decide:1"]);

        store
            .mark_published("r1", &["r1:1:decide:1".to_string()])
            .await?;
        assert_eq!(
            store.pending_runs().await?,
            1,
            "one effect is still pending"
        );
        store
            .mark_published("r1", &["r1:1:1:exec".to_string()])
            .await?;
        assert_eq!(store.pending_runs().await?, 0);
        assert!(store.claim_pending(i64::MAX, 9_000, 10).await?.is_empty());

        // A write without effects leaves no trace in the outbox.
        let write = CasWrite {
            expected_version: 2,
            record: "{\"v\":3}".into(),
            now_ms: 5_000,
            ..CasWrite::default()
        };
        store.compare_and_set("r1", write).await?;
        assert_eq!(store.pending_runs().await?, 0);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_log_is_capped_and_trimmed_by_retention() -> Result<()> {
    bounded(async {
        let (_server, store) = redis_store().await?;
        let store = store.with_log_limits(100, Some(Duration::from_secs(60)));
        assert!(
            store
                .create("r1", "{}", "running", 0, None, Some("e0"))
                .await?
        );
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis() as i64;
        let mut version = 1;
        for batch in 0..10 {
            let write = CasWrite {
                expected_version: version,
                record: "{}".into(),
                log_entries: (0..50).map(|i| format!("e{batch}-{i}")).collect(),
                now_ms: now,
                ..CasWrite::default()
            };
            assert!(matches!(
                store.compare_and_set("r1", write).await?,
                CasOutcome::Applied { .. }
            ));
            version += 1;
        }
        let kept = store.read_log("r1", None, 10_000, None).await?;
        // Approximate trimming keeps at least the cap and far fewer than the 501 appended.
        assert!(
            (100..=300).contains(&kept.len()),
            "{} entries kept",
            kept.len()
        );
        assert_eq!(kept.last().map(|r| r.entry.as_str()), Some("e9-49"));

        // Entries older than the retention go at the next append (the stream ids are the
        // append times, so a write "a minute later" trims everything before it).
        let write = CasWrite {
            expected_version: version,
            record: "{}".into(),
            log_entries: vec!["later".into()],
            now_ms: now + 10 * 60_000,
            ..CasWrite::default()
        };
        store.compare_and_set("r1", write).await?;
        let kept = store.read_log("r1", None, 10_000, None).await?;
        assert!(
            kept.len() < 100,
            "entries older than the retention are trimmed: {} kept",
            kept.len()
        );
        assert_eq!(kept.last().map(|r| r.entry.as_str()), Some("later"));
        Ok(())
    })
    .await
}

/// Undoing a refused creation: gone without a trace while nothing acted on it; refused once
/// the relay claimed its effects or a transition moved it on; nothing stored is "undone".
#[tokio::test]
async fn a_refused_creation_is_discarded_only_while_nothing_acted_on_it() -> Result<()> {
    bounded(async {
        let (_server, store) = redis_store().await?;
        let create = |id: &'static str| {
            let store = store.clone();
            async move {
                store
                    .create_with_effects(
                        id,
                        "{}",
                        "queued",
                        1_000,
                        Some(9_000),
                        &["\"submitted\"".to_string()],
                        &effects(&[&format!("{id}:1:decide:1")]),
                    )
                    .await
            }
        };
        // Untouched: discarded, with its log, outbox and index entries.
        assert!(create("a").await?);
        assert!(store.discard_unstarted("a", "queued", 1_000).await?);
        assert!(store.load("a").await?.is_none());
        assert!(store.pending_effects("a").await?.is_empty());
        assert_eq!(store.pending_runs().await?, 0);
        // Nothing stored: nothing to undo.
        assert!(store.discard_unstarted("never", "queued", 1_000).await?);
        // The relay claimed its effects: it stands.
        assert!(create("b").await?);
        assert_eq!(store.claim_pending(1_000, 5_000, 10).await?, ["b"]);
        assert!(!store.discard_unstarted("b", "queued", 1_000).await?);
        assert!(store.load("b").await?.is_some());
        // A transition moved it on: it stands.
        assert!(create("c").await?);
        let write = CasWrite {
            expected_version: 1,
            record: "{\"v\":2}".into(),
            now_ms: 2_000,
            ..CasWrite::default()
        };
        assert!(matches!(
            store.compare_and_set("c", write).await?,
            CasOutcome::Applied { new_version: 2 }
        ));
        assert!(!store.discard_unstarted("c", "queued", 1_000).await?);
        assert!(store.load("c").await?.is_some());
        Ok(())
    })
    .await
}
