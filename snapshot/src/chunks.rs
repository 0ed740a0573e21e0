//! Reading an object's chunks with JetStream direct gets: one `next_by_subj` request per chunk
//! on `$O.<bucket>.C.<nuid>`, in stream order. Needs only the right to publish to
//! `$JS.API.DIRECT.GET.OBJ_<bucket>` (no consumer is created), so the auditor's read-only
//! credentials suffice. Sizes are checked against the object's metadata as chunks arrive;
//! content is verified by the caller against the sha256 the object is named by.

use async_nats::jetstream::object_store::ObjectInfo;
use async_nats::jetstream::stream::DirectGetErrorKind;
use bytes::Bytes;

use std::time::Duration;

use async_nats::jetstream::stream::Stream;

use crate::error::{store_error, SnapshotError};

pub(crate) struct ChunkReader<'a> {
    stream: &'a Stream,
    timeout: Duration,
    name: String,
    subject: String,
    next_sequence: u64,
    chunks_total: usize,
    chunks_read: usize,
    bytes_left: usize,
}

impl<'a> ChunkReader<'a> {
    /// Reads object `info` of `bucket` from the bucket's stream, each request bounded by
    /// `timeout`.
    pub(crate) fn new(
        stream: &'a Stream,
        bucket: &str,
        timeout: Duration,
        info: &ObjectInfo,
    ) -> ChunkReader<'a> {
        ChunkReader {
            stream,
            timeout,
            name: info.name.clone(),
            subject: format!("$O.{bucket}.C.{}", info.nuid),
            next_sequence: 1,
            chunks_total: info.chunks,
            chunks_read: 0,
            bytes_left: info.size,
        }
    }

    fn integrity(&self, reason: String) -> SnapshotError {
        SnapshotError::Integrity {
            path: self.name.clone(),
            reason,
        }
    }

    /// The next chunk, or None after the last one. A missing chunk or a size that disagrees
    /// with the metadata is `Integrity`.
    pub(crate) async fn next_chunk(&mut self) -> Result<Option<Bytes>, SnapshotError> {
        if self.chunks_read == self.chunks_total {
            if self.bytes_left != 0 {
                return Err(self.integrity(format!(
                    "object is {} bytes shorter than recorded",
                    self.bytes_left
                )));
            }
            return Ok(None);
        }
        let timeout = self.timeout;
        let request = self
            .stream
            .direct_get_next_for_subject(self.subject.clone(), Some(self.next_sequence));
        let message = match tokio::time::timeout(timeout, request).await {
            Ok(Ok(message)) => message,
            Ok(Err(err)) if matches!(err.kind(), DirectGetErrorKind::NotFound) => {
                return Err(self.integrity(format!(
                    "chunk {} of {} is missing",
                    self.chunks_read + 1,
                    self.chunks_total
                )))
            }
            Ok(Err(err)) => return Err(store_error("direct get", err)),
            Err(_) => {
                return Err(SnapshotError::Timeout {
                    op: "direct get",
                    after: timeout,
                })
            }
        };
        let payload = message.payload;
        if payload.len() > self.bytes_left {
            return Err(self.integrity("object is longer than recorded".to_string()));
        }
        self.bytes_left -= payload.len();
        self.chunks_read += 1;
        self.next_sequence = message.sequence + 1;
        Ok(Some(payload))
    }
}
