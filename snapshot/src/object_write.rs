//! Writing one object of a content-addressed bucket in the object store's layout (its chunks on
//! `$O.<bucket>.C.<nuid>`, then its metadata on `$O.<bucket>.M.<base64url name>`, rolled up so
//! only the latest stays), as the object store client's `put` does, with three differences:
//! - The writer says what the bucket holds under the name (every caller has just looked, to
//!   skip a write it does not need), so no second look-up goes out.
//! - Nothing is purged: an executor's or auditor's NATS user may write objects but neither
//!   purge nor delete (deploy/nats/loopgate-users.conf), and the client's `put` of a name the
//!   bucket holds ends in a purge of the old chunks, which such a user cannot send. Writing an
//!   object the bucket holds with the same size (a content-addressed name: the same bytes, or
//!   a copy that fails every reader's digest check either way) only writes its metadata again,
//!   dated now, over the same chunks: what makes an old blob young for the snapshot GC. An
//!   object held with another size (the other stored form of a manifest page) gets new chunks;
//!   the old ones stay in the stream unreferenced until the manager's collection purges them
//!   (`gc_chunks`).
//! - A large object's chunks are published without waiting for each one's acknowledgement
//!   before the next ([`ACKS_IN_FLIGHT`] at most).

use std::collections::HashMap;
use std::future::IntoFuture;

use async_nats::jetstream::object_store::{ObjectInfo, ObjectOptions};
use async_nats::jetstream::{self, context::PublishAckFuture};
use async_nats::HeaderMap;
use base64::Engine;
use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::error::{bounded, store_error, SnapshotError};

/// Bytes per chunk: the object store client's default.
const CHUNK_BYTES: usize = 128 * 1024;
/// Chunks published whose acknowledgement is still awaited.
const ACKS_IN_FLIGHT: usize = 32;

/// Where one object goes: a bucket on a JetStream context, each request bounded by `after`.
pub(crate) struct ObjectWrite<'a> {
    pub(crate) js: &'a jetstream::Context,
    pub(crate) bucket: &'a str,
    pub(crate) after: std::time::Duration,
}

impl ObjectWrite<'_> {
    /// Store `bytes` as object `name`, the bucket holding `held` under that name now (None:
    /// nothing, or a deleted object).
    pub(crate) async fn put(
        &self,
        name: &str,
        bytes: &[u8],
        held: Option<&ObjectInfo>,
    ) -> Result<(), SnapshotError> {
        if let Some(held) = held.filter(|held| held.size == bytes.len() && !held.deleted) {
            return self.date_again(held).await;
        }
        let nuid = uuid::Uuid::new_v4().simple().to_string();
        let chunks = self.publish_chunks(&nuid, bytes).await?;
        let digest = base64::engine::general_purpose::URL_SAFE.encode(Sha256::digest(bytes));
        let info = ObjectInfo {
            name: name.to_string(),
            description: None,
            metadata: HashMap::new(),
            headers: None,
            options: Some(ObjectOptions {
                link: None,
                max_chunk_size: Some(CHUNK_BYTES),
            }),
            bucket: self.bucket.to_string(),
            nuid,
            size: bytes.len(),
            chunks,
            modified: Some(time::OffsetDateTime::now_utc()),
            digest: Some(format!("SHA-256={digest}")),
            deleted: false,
        };
        self.publish_meta(&info).await
    }

    /// Write object `held`'s metadata again, dated now, over the same chunks.
    pub(crate) async fn date_again(&self, held: &ObjectInfo) -> Result<(), SnapshotError> {
        let again = ObjectInfo {
            modified: Some(time::OffsetDateTime::now_utc()),
            ..held.clone()
        };
        self.publish_meta(&again).await
    }

    /// Publish `bytes` in chunks on `$O.<bucket>.C.<nuid>`; returns how many.
    async fn publish_chunks(&self, nuid: &str, bytes: &[u8]) -> Result<usize, SnapshotError> {
        let subject = format!("$O.{}.C.{nuid}", self.bucket);
        let mut acks: Vec<PublishAckFuture> = Vec::new();
        let mut chunks = 0;
        for chunk in bytes.chunks(CHUNK_BYTES) {
            if acks.len() == ACKS_IN_FLIGHT {
                self.await_acks(std::mem::take(&mut acks)).await?;
            }
            let payload = Bytes::copy_from_slice(chunk);
            let ack = bounded(
                "put chunk",
                self.after,
                self.js.publish(subject.clone(), payload),
            )
            .await?;
            acks.push(ack);
            chunks += 1;
        }
        self.await_acks(acks).await?;
        Ok(chunks)
    }

    async fn await_acks(&self, acks: Vec<PublishAckFuture>) -> Result<(), SnapshotError> {
        for ack in acks {
            bounded("put chunk ack", self.after, ack.into_future()).await?;
        }
        Ok(())
    }

    /// Publish `info` as the object's metadata, replacing any earlier (`Nats-Rollup: sub`).
    async fn publish_meta(&self, info: &ObjectInfo) -> Result<(), SnapshotError> {
        let name = base64::engine::general_purpose::URL_SAFE.encode(&info.name);
        let subject = format!("$O.{}.M.{name}", self.bucket);
        let body = serde_json::to_vec(info).map_err(|err| store_error("put meta", err))?;
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Rollup", "sub");
        let ack = bounded(
            "put meta",
            self.after,
            self.js.publish_with_headers(subject, headers, body.into()),
        )
        .await?;
        bounded("put meta ack", self.after, ack.into_future()).await?;
        Ok(())
    }
}
