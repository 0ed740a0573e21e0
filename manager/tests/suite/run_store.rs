//! Redis run store: create, CAS, log, evidence, indexes, expiry.

use std::time::Duration;

use anyhow::Result;
use loopgate_manager::run_store::{CasOutcome, CasWrite, StoreError};
use loopgate_test_support::wait_until;

use crate::{bounded, cas, redis_store};

#[tokio::test]
async fn cas_lets_exactly_one_of_two_writers_win() -> Result<()> {
    bounded(async {
        let (_server, store) = redis_store().await?;
        assert!(
            store
                .create("r1", r#"{"n":0}"#, "pending", 1000, None, Some("created"))
                .await?
        );
        assert!(
            !store
                .create("r1", r#"{"n":9}"#, "pending", 1000, None, None)
                .await?
        );
        let loaded = store.load("r1").await?.unwrap();
        assert_eq!((loaded.version, loaded.record.as_str()), (1, r#"{"n":0}"#));
        assert_eq!(store.load("nope").await?, None);

        let (a, b) = tokio::join!(
            store.compare_and_set("r1", cas(1, r#"{"by":"a"}"#)),
            store.compare_and_set("r1", cas(1, r#"{"by":"b"}"#)),
        );
        let outcomes = [a?, b?];
        let applied: Vec<_> = outcomes
            .iter()
            .filter(|o| matches!(o, CasOutcome::Applied { new_version: 2 }))
            .collect();
        assert_eq!(applied.len(), 1, "{outcomes:?}");
        assert!(outcomes.contains(&CasOutcome::Conflict { current_version: 2 }));
        assert_eq!(store.load("r1").await?.unwrap().version, 2);

        assert_eq!(
            store.compare_and_set("missing", cas(1, "{}")).await?,
            CasOutcome::Conflict { current_version: 0 }
        );
        assert!(matches!(
            store.compare_and_set("bad:id", cas(1, "{}")).await,
            Err(StoreError::InvalidName { .. })
        ));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn log_order_evidence_and_state_indexes() -> Result<()> {
    bounded(async {
        let (_server, store) = redis_store().await?;
        assert!(
            store
                .create("r2", "{}", "pending", 2000, None, Some("e0"))
                .await?
        );
        assert!(
            store
                .create("r3", "{}", "pending", 3000, None, None)
                .await?
        );
        let write = CasWrite {
            log_entries: vec!["e1".into(), "e2".into(), "e3".into()],
            evidence: vec![
                ("check:b".into(), r#"{"verdict":"fail"}"#.into()),
                ("check:a".into(), r#"{"verdict":"pass"}"#.into()),
            ],
            state_change: Some(("pending".into(), "running".into())),
            ..cas(1, r#"{"s":"running"}"#)
        };
        assert_eq!(
            store.compare_and_set("r2", write).await?,
            CasOutcome::Applied { new_version: 2 }
        );

        let log = store.read_log("r2", None, 100, None).await?;
        let entries: Vec<&str> = log.iter().map(|r| r.entry.as_str()).collect();
        assert_eq!(entries, vec!["e0", "e1", "e2", "e3"]);
        let tail = store.read_log("r2", Some(&log[1].id), 2, None).await?;
        assert_eq!(
            tail.iter().map(|r| r.entry.as_str()).collect::<Vec<_>>(),
            vec!["e2", "e3"]
        );

        // A blocking read wakes up on a new entry without holding up other calls.
        let last = log[3].id.clone();
        let reader = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .read_log("r2", Some(&last), 10, Some(Duration::from_secs(10)))
                    .await
            })
        };
        store.ping().await?;
        store
            .compare_and_set(
                "r2",
                CasWrite {
                    log_entries: vec!["e4".into()],
                    ..cas(2, "{}")
                },
            )
            .await?;
        let woke = reader.await??;
        assert_eq!(
            woke.iter().map(|r| r.entry.as_str()).collect::<Vec<_>>(),
            vec!["e4"]
        );
        let empty = store
            .read_log(
                "r2",
                Some(&woke[0].id),
                10,
                Some(Duration::from_millis(100)),
            )
            .await?;
        assert!(empty.is_empty());
        // A blocking read longer than the client's default response timeout (500 ms) that
        // sees nothing ends empty, not with a timeout error.
        let quiet = store
            .read_log(
                "r2",
                Some(&woke[0].id),
                10,
                Some(Duration::from_millis(1500)),
            )
            .await?;
        assert!(quiet.is_empty());

        assert_eq!(
            store.evidence("r2").await?,
            vec![
                ("check:a".to_string(), r#"{"verdict":"pass"}"#.to_string()),
                ("check:b".to_string(), r#"{"verdict":"fail"}"#.to_string()),
            ]
        );
        assert_eq!(store.list(Some("running"), 0, 10).await?, vec!["r2"]);
        assert_eq!(store.list(Some("pending"), 0, 10).await?, vec!["r3"]);
        assert_eq!(store.list(None, 0, 10).await?, vec!["r3", "r2"]);
        assert_eq!(store.list(None, 1, 10).await?, vec!["r2"]);

        // Terminal transition with expiry: all keys vanish and the indexes are pruned.
        let done = CasWrite {
            state_change: Some(("running".into(), "done".into())),
            expire_after: Some(Duration::from_millis(200)),
            ..cas(3, r#"{"s":"done"}"#)
        };
        assert_eq!(
            store.compare_and_set("r2", done).await?,
            CasOutcome::Applied { new_version: 4 }
        );
        assert_eq!(
            store.list(Some("running"), 0, 10).await?,
            Vec::<String>::new()
        );
        assert_eq!(store.list(Some("done"), 0, 10).await?, vec!["r2"]);
        wait_until(Duration::from_secs(10), || async {
            matches!(store.load("r2").await, Ok(None))
        })
        .await?;
        assert!(store.read_log("r2", None, 10, None).await?.is_empty());
        assert!(store.evidence("r2").await?.is_empty());
        assert_eq!(store.list(Some("done"), 0, 10).await?, Vec::<String>::new());
        assert_eq!(store.list(None, 0, 10).await?, vec!["r3"]);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ids_with_a_prefix_are_found_by_a_scan_of_the_index() -> Result<()> {
    bounded(async {
        let (_server, store) = redis_store().await?;
        for (i, id) in ["ab12", "ab34", "cd56"].iter().enumerate() {
            let score = 1000 * (i as u64 + 1);
            assert!(store.create(id, "{}", "pending", score, None, None).await?);
        }
        let cases: [(&str, usize, Vec<&str>); 4] = [
            ("ab", 10, vec!["ab12", "ab34"]),
            ("AB3", 10, vec!["ab34"]),
            ("ef", 10, vec![]),
            ("ab", 1, vec!["ab12"]),
        ];
        for (prefix, limit, want) in cases {
            assert_eq!(
                store.ids_with_prefix(prefix, limit).await?,
                want,
                "{prefix}"
            );
        }
        // Not a run id's characters: refused, never used as a glob pattern.
        for bad in ["a*", "", "a?b", "[ab]"] {
            assert!(store.ids_with_prefix(bad, 10).await.is_err(), "{bad}");
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn deadlines_move_with_the_record() -> Result<()> {
    bounded(async {
        let (_server, store) = redis_store().await?;
        assert!(
            store
                .create("d1", "{}", "pending", 1, Some(5_000), None)
                .await?
        );
        assert!(store.create("d2", "{}", "pending", 1, None, None).await?);
        assert_eq!(store.due_deadlines(4_999, 10).await?, Vec::<String>::new());
        assert_eq!(
            store.due_deadlines(5_000, 10).await?,
            vec!["d1".to_string()]
        );
        // A CAS moves the deadline atomically with the record...
        let mut write = cas(1, "{\"v\":2}");
        write.deadline_ms = Some(9_000);
        assert!(matches!(
            store.compare_and_set("d1", write).await?,
            CasOutcome::Applied { .. }
        ));
        assert!(store.due_deadlines(8_999, 10).await?.is_empty());
        // ...a conflicting CAS leaves it alone...
        let mut stale = cas(1, "{}");
        stale.deadline_ms = Some(1);
        assert!(matches!(
            store.compare_and_set("d1", stale).await?,
            CasOutcome::Conflict { .. }
        ));
        assert!(store.due_deadlines(8_999, 10).await?.is_empty());
        // ...and a write without one clears it.
        assert!(matches!(
            store.compare_and_set("d1", cas(2, "{}")).await?,
            CasOutcome::Applied { .. }
        ));
        assert!(store.due_deadlines(i64::MAX, 10).await?.is_empty());
        store.clear_deadline("d2").await?;
        Ok(())
    })
    .await
}
