//! Work a consumer gave up on: a message of `LG_EXEC` or `LG_AUDIT` that exhausted its
//! deliveries stays in its work-queue stream (nobody acked it) and the server announces it with
//! a max-deliveries advisory, which `LG_DEAD` captures. Whoever handles that advisory (the
//! manager) reads the message by its stream sequence, copies it to the dead letters and then
//! removes it, so a stuck step neither waits for its deadline nor holds the queue's bytes.

use async_nats::jetstream::stream::{DeleteMessageErrorKind, RawMessageErrorKind};
use async_nats::jetstream::ErrorCode;

use crate::bus::{with_timeout, Bus};
use crate::bus_error::{BusError, Operation, StreamErrorKind};

/// A work message read back by its stream sequence.
#[derive(Debug, Clone)]
pub struct GivenUpWork {
    /// The subject it was published on (`loopgate.exec.cli`, `loopgate.audit.request`).
    pub subject: String,
    pub payload: Vec<u8>,
}

impl Bus {
    /// The handle of work stream `stream`, looked up within the request timeout.
    async fn work_stream(
        &self,
        stream: &str,
    ) -> Result<async_nats::jetstream::stream::Stream, BusError> {
        with_timeout(
            StreamErrorKind::Lookup,
            self.request_timeout(),
            self.jetstream().get_stream(stream),
        )
        .await
    }

    /// Message `sequence` of work stream `stream`; `None` when it is no longer there (acked
    /// after all, or removed by an earlier handling of the same advisory).
    pub async fn given_up_work(
        &self,
        stream: &str,
        sequence: u64,
    ) -> Result<Option<GivenUpWork>, BusError> {
        let timeout = self.request_timeout();
        let handle = self.work_stream(stream).await?;
        match tokio::time::timeout(timeout, handle.get_raw_message(sequence)).await {
            Ok(Ok(message)) => Ok(Some(GivenUpWork {
                subject: message.subject.to_string(),
                payload: message.payload.to_vec(),
            })),
            Ok(Err(err)) if err.kind() == RawMessageErrorKind::NoMessageFound => Ok(None),
            Ok(Err(err)) => Err(StreamErrorKind::GetMessage.failed(err.into())),
            Err(_) => Err(BusError::Timeout {
                op: StreamErrorKind::GetMessage.op(),
                after: timeout,
            }),
        }
    }

    /// Remove message `sequence` from work stream `stream` (one already gone is fine).
    pub async fn remove_given_up_work(&self, stream: &str, sequence: u64) -> Result<(), BusError> {
        let timeout = self.request_timeout();
        let handle = self.work_stream(stream).await?;
        match tokio::time::timeout(timeout, handle.delete_message(sequence)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(err))
                if matches!(err.kind(), DeleteMessageErrorKind::JetStream(e)
                    if e.error_code() == ErrorCode::NO_MESSAGE_FOUND) =>
            {
                Ok(())
            }
            Ok(Err(err)) => Err(StreamErrorKind::DeleteMessage.failed(err.into())),
            Err(_) => Err(BusError::Timeout {
                op: StreamErrorKind::DeleteMessage.op(),
                after: timeout,
            }),
        }
    }
}
