//! Unit tests of the run store's pure parts: names, keys, replica acknowledgements, and which
//! errors send it back to the sentinels.

use super::*;

#[test]
fn the_store_moves_into_tasks() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<RunStore>();
}

#[test]
fn name_checks() {
    let cases = [
        ("r1", true),
        ("0190-abc_x.y", true),
        ("", false),
        ("a:b", false),
        ("a b", false),
        ("a\n", false),
    ];
    for (value, ok) in cases {
        assert_eq!(check_name("run id", value).is_ok(), ok, "{value:?}");
    }
    assert!(check_state("running").is_ok());
    assert!(check_state("all").is_err());
}

#[test]
fn a_write_is_acknowledged_only_with_enough_replicas() {
    // (acked, wanted) -> acknowledged
    for (acked, ok) in [
        (None, true),
        (Some((1, 1)), true),
        (Some((2, 1)), true),
        (Some((0, 1)), false),
        (Some((1, 2)), false),
    ] {
        let got = replicated("compare_and_set", acked);
        assert_eq!(got.is_ok(), ok, "{acked:?}: {got:?}");
        if let Err(e) = got {
            assert!(e.is_retryable());
            assert!(!e.may_mean_failover());
        }
    }
}

#[test]
fn which_errors_send_the_store_back_to_the_sentinels() {
    let server = |kind, text: &str| StoreError::Redis {
        op: "compare_and_set",
        source: redis::RedisError::from((redis::ErrorKind::Server(kind), "x", text.into())),
    };
    let io = StoreError::Redis {
        op: "load",
        source: redis::RedisError::from(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )),
    };
    // A pipeline whose WAIT a demoted primary refused (plain ERR, as redis-server 7 says it).
    let wait_on_replica = StoreError::Redis {
        op: "claim_pending",
        source: redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "x",
            "WAIT cannot be used with replica instances.".into(),
        )),
    };
    let cases = [
        (wait_on_replica, true),
        (server(redis::ServerErrorKind::ReadOnly, "READONLY"), true),
        (
            server(redis::ServerErrorKind::MasterDown, "MASTERDOWN"),
            true,
        ),
        (server(redis::ServerErrorKind::NoScript, "NOSCRIPT"), false),
        (io, true),
        (
            StoreError::Timeout {
                op: "load",
                after: Duration::from_secs(1),
            },
            true,
        ),
        (
            StoreError::NoPrimary {
                master_name: "m".into(),
                detail: "none".into(),
            },
            false,
        ),
        (
            StoreError::Protocol {
                op: "role",
                detail: "replica".into(),
            },
            false,
        ),
    ];
    for (err, failover) in cases {
        assert_eq!(err.may_mean_failover(), failover, "{err}");
    }
}

#[test]
fn key_layout() {
    assert_eq!(run_key("r"), "lg:run:r");
    assert_eq!(log_key("r"), "lg:run:r:log");
    assert_eq!(evidence_key("r"), "lg:run:r:evidence");
    assert_eq!(reports_key("r"), "lg:run:r:reports");
    assert_eq!(state_index_key("running"), "lg:runs:running");
    assert_eq!(outbox_key("r"), "lg:run:r:outbox");
}
