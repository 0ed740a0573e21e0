//! The worker runtime against a real nats-server: the consume loop settles each delivery as
//! its handler says, keeps long handlers alive past ack_wait, drains on cancel, and the
//! keep-alive reports a lost delivery when the server goes away.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use loopgate_protocol::subjects::Capability;
use loopgate_test_support::{wait_until, NatsServer};
use loopgate_transport::runtime::{
    run_consumer, run_gated_consumer, ConsumeOptions, KeepAlive, PullGate, Settle,
};
use loopgate_transport::{Bus, ConsumerOptions, Work};
use tokio_util::sync::CancellationToken;

use crate::{bounded, bus_on};

async fn publish(bus: &Bus, n: u32) -> Result<()> {
    let body = serde_json::json!({"n": n});
    bus.publish_json(
        &bus.subjects().exec(Capability::Cli),
        &body,
        &format!("job-{n}"),
        &[],
    )
    .await?;
    Ok(())
}

fn options(ack_wait: Duration) -> ConsumeOptions {
    ConsumeOptions {
        concurrency: 2,
        pull_batch: 1,
        poll: Duration::from_millis(200),
        ack_wait,
        drain: Duration::from_secs(10),
    }
}

/// Ack, term and nak(then ack) each end as they should: acked and termed messages never come
/// back, the nak'ed one comes back once with attempt 2.
#[tokio::test]
async fn handlers_settle_their_deliveries() -> Result<()> {
    bounded(async {
        let server = NatsServer::start().await?;
        let bus = bus_on(&server).await?;
        let consumer_options = ConsumerOptions {
            ack_wait: Duration::from_secs(5),
            ..ConsumerOptions::default()
        };
        let consumer = bus
            .work_consumer(Work::Exec(Capability::Cli), consumer_options)
            .await?;
        for n in 0..3 {
            publish(&bus, n).await?;
        }
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        let cancel = CancellationToken::new();
        let loop_task = tokio::spawn(run_consumer(
            consumer,
            options(consumer_options.ack_wait),
            cancel.clone(),
            move |delivery, _lease| {
                let record = record.clone();
                async move {
                    let n = delivery
                        .decode::<serde_json::Value>()
                        .ok()
                        .and_then(|v| v["n"].as_u64())
                        .unwrap_or(99);
                    let attempt = delivery.attempt();
                    record.lock().unwrap().push((n, attempt));
                    match (n, attempt) {
                        (0, _) => Settle::Ack,
                        (1, _) => Settle::Term("not wanted".into()),
                        (_, 1) => Settle::Nak(Some(Duration::from_millis(100))),
                        _ => Settle::Ack,
                    }
                }
            },
        ));
        wait_until(Duration::from_secs(20), || {
            let seen = seen.clone();
            async move { seen.lock().unwrap().len() >= 4 }
        })
        .await?;
        // Nothing else arrives: acked and termed messages stay settled.
        tokio::time::sleep(Duration::from_secs(1)).await;
        cancel.cancel();
        loop_task.await?;
        let mut seen = seen.lock().unwrap().clone();
        seen.sort_unstable();
        assert_eq!(seen, vec![(0, 1), (1, 1), (2, 1), (2, 2)]);
        Ok(())
    })
    .await
}

/// A handler that runs for several ack_waits is not redelivered (progress acks keep it), and
/// cancelling the loop lets it finish within the drain.
#[tokio::test]
async fn long_handlers_stay_owned_and_drain_on_cancel() -> Result<()> {
    bounded(async {
        let server = NatsServer::start().await?;
        let bus = bus_on(&server).await?;
        let ack_wait = Duration::from_secs(2);
        let consumer_options = ConsumerOptions {
            ack_wait,
            ..ConsumerOptions::default()
        };
        let consumer = bus
            .work_consumer(Work::Exec(Capability::Cli), consumer_options)
            .await?;
        publish(&bus, 7).await?;
        let calls = Arc::new(AtomicU32::new(0));
        let finished = Arc::new(AtomicU32::new(0));
        let (counted, done) = (calls.clone(), finished.clone());
        let cancel = CancellationToken::new();
        let loop_task = tokio::spawn(run_consumer(
            consumer,
            options(ack_wait),
            cancel.clone(),
            move |_delivery, lease| {
                let (counted, done) = (counted.clone(), done.clone());
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(7)).await;
                    assert!(!lease.lost().is_cancelled());
                    done.fetch_add(1, Ordering::SeqCst);
                    Settle::Ack
                }
            },
        ));
        wait_until(Duration::from_secs(10), || {
            let calls = calls.clone();
            async move { calls.load(Ordering::SeqCst) == 1 }
        })
        .await?;
        // Past several ack_waits: the only delivery is still the first one.
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "redelivered while in progress"
        );
        cancel.cancel();
        loop_task.await?;
        assert_eq!(
            finished.load(Ordering::SeqCst),
            1,
            "the handler was not drained"
        );
        Ok(())
    })
    .await
}

/// SIGTERM while a pull is outstanding: the stopping worker starts nothing more, and a message
/// published after the signal goes to another worker at once, not after ack_wait.
#[tokio::test]
async fn a_stopping_worker_leaves_later_messages_to_others() -> Result<()> {
    bounded(async {
        let server = NatsServer::start().await?;
        let bus = bus_on(&server).await?;
        // Far longer than the test: only a nak can free the message in time.
        let consumer_options = ConsumerOptions {
            ack_wait: Duration::from_secs(120),
            ..ConsumerOptions::default()
        };
        let work = Work::Exec(Capability::Cli);
        let consumer = bus.work_consumer(work, consumer_options).await?;
        let loop_options = ConsumeOptions {
            concurrency: 1,
            pull_batch: 1,
            poll: Duration::from_secs(3),
            ack_wait: consumer_options.ack_wait,
            drain: Duration::from_secs(5),
        };
        let (loop_task, started, cancel) = counting_loop(consumer, loop_options, 0);
        let info = |bus: Bus| async move {
            let stream = bus.jetstream().get_stream(work.stream_name()).await?;
            let info = stream.consumer_info(work.durable_name()).await?;
            anyhow::Ok((info.num_waiting, info.num_ack_pending, info.num_pending))
        };
        // The loop's pull is waiting on the server; then the signal, then a message.
        wait_until(Duration::from_secs(10), || {
            let bus = bus.clone();
            async move { info(bus).await.is_ok_and(|(waiting, _, _)| waiting >= 1) }
        })
        .await?;
        cancel.cancel();
        publish(&bus, 1).await?;
        loop_task.await?;
        assert_eq!(
            started.load(Ordering::SeqCst),
            0,
            "started after the signal"
        );
        assert_eq!(
            started.load(Ordering::SeqCst),
            0,
            "started after the signal"
        );
        // Well inside ack_wait another worker gets it.
        let mut next_worker = bus.work_consumer(work, consumer_options).await?;
        let handed_back = next_worker.next(Duration::from_secs(10)).await?;
        assert!(
            handed_back.is_some(),
            "the message is still held by the stopped worker"
        );
        Ok(())
    })
    .await
}

/// With the server gone, progress acks fail and the keep-alive reports the delivery lost
/// after ack_wait.
#[tokio::test]
async fn keep_alive_reports_a_lost_delivery() -> Result<()> {
    bounded(async {
        let mut server = NatsServer::start().await?;
        let bus = bus_on(&server).await?;
        let ack_wait = Duration::from_secs(3);
        let mut consumer = bus
            .work_consumer(
                Work::Exec(Capability::Cli),
                ConsumerOptions {
                    ack_wait,
                    ..ConsumerOptions::default()
                },
            )
            .await?;
        publish(&bus, 1).await?;
        let delivery = consumer
            .next(Duration::from_secs(5))
            .await?
            .context("no delivery")?;
        let keep_alive = KeepAlive::start(delivery.progress_handle(), ack_wait);
        let lost = keep_alive.lost();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!lost.is_cancelled());
        server.kill();
        tokio::time::timeout(Duration::from_secs(30), lost.cancelled())
            .await
            .context("lost never fired")?;
        Ok(())
    })
    .await
}

/// A closed pull gate takes nothing: the message stays queued with its delivery count
/// untouched, and is delivered once (attempt 1) after the gate opens.
#[tokio::test]
async fn a_closed_gate_leaves_work_queued_until_it_opens() -> Result<()> {
    bounded(async {
        let server = NatsServer::start().await?;
        let bus = bus_on(&server).await?;
        let consumer_options = ConsumerOptions {
            ack_wait: Duration::from_secs(5),
            ..ConsumerOptions::default()
        };
        let consumer = bus
            .work_consumer(Work::Exec(Capability::Cli), consumer_options)
            .await?;
        let open = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let asked = Arc::new(AtomicU32::new(0));
        let (gate_open, gate_asked) = (open.clone(), asked.clone());
        let gate: PullGate = Arc::new(move || {
            gate_asked.fetch_add(1, Ordering::SeqCst);
            if gate_open.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err("disk full".into())
            }
        });
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        let cancel = CancellationToken::new();
        let loop_task = tokio::spawn(run_gated_consumer(
            consumer,
            options(consumer_options.ack_wait),
            gate,
            cancel.clone(),
            move |delivery, _lease| {
                let record = record.clone();
                async move {
                    record.lock().unwrap().push(delivery.attempt());
                    Settle::Ack
                }
            },
        ));
        publish(&bus, 1).await?;
        // The loop keeps asking the closed gate and takes nothing.
        wait_until(Duration::from_secs(10), || {
            let asked = asked.clone();
            async move { asked.load(Ordering::SeqCst) >= 4 }
        })
        .await?;
        assert!(seen.lock().unwrap().is_empty());
        open.store(true, Ordering::SeqCst);
        wait_until(Duration::from_secs(10), || {
            let seen = seen.clone();
            async move { !seen.lock().unwrap().is_empty() }
        })
        .await
        .context("nothing delivered after the gate opened")?;
        cancel.cancel();
        loop_task.await?;
        assert_eq!(*seen.lock().unwrap(), vec![1]);
        Ok(())
    })
    .await
}

/// A loop with free handlers asks for as many messages as it can start in one pull request
/// (the manager's results loop: one request per batch instead of one per message), each one
/// still handled at once; with `pull_batch` 1 every message costs a request of its own.
#[tokio::test]
async fn free_handlers_take_a_batch_in_one_pull_request() -> Result<()> {
    bounded(async {
        for (pull_batch, most_requests) in [(8, 2), (1, 8)] {
            let (requests, handled) = pull_requests_for_eight(pull_batch).await?;
            assert_eq!(handled, 8, "pull_batch {pull_batch}");
            assert!(
                (if pull_batch == 1 {
                    requests >= most_requests
                } else {
                    requests <= most_requests
                }),
                "pull_batch {pull_batch}: {requests} pull requests for 8 messages"
            );
        }
        Ok(())
    })
    .await
}

/// Pull requests a loop of 8 handlers sent for 8 queued messages (each handler holds its
/// message until all 8 have started), and how many it handled.
async fn pull_requests_for_eight(pull_batch: usize) -> Result<(usize, u32)> {
    use futures::StreamExt;
    let server = NatsServer::start().await?;
    let bus = bus_on(&server).await?;
    let mut requests = bus
        .client()
        .subscribe("$JS.API.CONSUMER.MSG.NEXT.>")
        .await?;
    let consumer_options = ConsumerOptions {
        ack_wait: Duration::from_secs(10),
        ..ConsumerOptions::default()
    };
    let consumer = bus
        .work_consumer(Work::Exec(Capability::Cli), consumer_options)
        .await?;
    for n in 0..8 {
        publish(&bus, n).await?;
    }
    let loop_options = ConsumeOptions {
        concurrency: 8,
        pull_batch,
        poll: Duration::from_secs(2),
        ack_wait: consumer_options.ack_wait,
        drain: Duration::from_secs(5),
    };
    // Each handler holds its message until all 8 have started: all 8 in flight at once.
    let (loop_task, started, cancel) = counting_loop(consumer, loop_options, 8);
    wait_until(Duration::from_secs(20), || {
        let started = started.clone();
        async move { started.load(Ordering::SeqCst) >= 8 }
    })
    .await?;
    cancel.cancel();
    loop_task.await?;
    bus.client().flush().await?;
    let mut sent = 0;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(200), requests.next()).await
    {
        sent += 1;
    }
    Ok((sent, started.load(Ordering::SeqCst)))
}

/// A consume loop whose handler counts the deliveries it starts and acks each once `hold_until`
/// of them have started (0: at once); its task, the count and its cancel token.
fn counting_loop(
    consumer: loopgate_transport::WorkConsumer,
    options: ConsumeOptions,
    hold_until: u32,
) -> (
    tokio::task::JoinHandle<()>,
    Arc<AtomicU32>,
    CancellationToken,
) {
    let started = Arc::new(AtomicU32::new(0));
    let counted = started.clone();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(run_consumer(
        consumer,
        options,
        cancel.clone(),
        move |_delivery, _lease| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = wait_until(Duration::from_secs(20), || {
                    let counted = counted.clone();
                    async move { counted.load(Ordering::SeqCst) >= hold_until }
                })
                .await;
                Settle::Ack
            }
        },
    ));
    (task, started, cancel)
}
