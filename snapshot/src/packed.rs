//! Manifest objects (flat manifests, paged heads, pages and groups) as stored: zstd-compressed.
//!
//! Content addressing is over the **uncompressed** bytes. A page or group is named
//! `blob/<sha256 of its JSON>` and listed by that digest, and a flat manifest's id is the sha256
//! of its canonical JSON, whatever encoding the stored object holds. The stored bytes are either
//! one zstd frame (they begin with the zstd magic number `28 b5 2f fd`) or, as every object was
//! written before, the JSON itself (which begins with `[` or `{`, never with that magic).
//!
//! A reader takes the stored bytes within the object's byte cap, decodes them within the same
//! cap on the decoded size, and then checks the decoded bytes against the digest exactly as it
//! checked stored bytes before: every object read is verified against its id. The decoder runs
//! on unverified bytes, so its output is capped (a frame inflating past the cap, a zip bomb, is
//! `ObjectTooLarge` as soon as the cap is passed, never held whole) and so is its window
//! (`MAX_WINDOW_LOG`); a frame that is not valid zstd is `Integrity`.
//!
//! Why the uncompressed digest: a freeze hashes pages as it cuts them and compresses only the
//! ones the store lacks; a digest does not depend on the zstd version or level; and a page
//! stored uncompressed by an earlier writer has the same name, so it is reused, not re-sent.

use std::borrow::Cow;
use std::io::Read;

use crate::error::{over_limit, SnapshotError};
use crate::store::{blob_object_name, reusable_size, SnapshotStore};

/// The first bytes of every zstd frame: a stored object starting with them is compressed.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// Compression level for manifest objects. Level 19 makes pages only ~7% smaller than level 3
/// and costs ~100x the time (every page of a first freeze is compressed), so the default.
const LEVEL: i32 = 3;
/// The largest window (2^23 = 8 MiB) a reader lets a frame ask for: above what `LEVEL` uses on
/// the largest inputs (2^21), so every object a writer makes decodes, and no frame header
/// makes the decoder allocate more.
const MAX_WINDOW_LOG: u32 = 23;

/// The stored form of `raw`: a zstd frame, or `raw` itself where that is no larger.
pub(crate) fn pack(raw: &[u8]) -> Vec<u8> {
    match zstd::bulk::compress(raw, LEVEL) {
        Ok(packed) if packed.len() < raw.len() => packed,
        _ => raw.to_vec(),
    }
}

/// The bytes a stored object (`name`, for errors) holds: decoded when it is a zstd frame, as
/// stored otherwise. Not verified here: the caller checks them against the object's digest.
/// `ObjectTooLarge` once the decoded bytes pass `limit` (at most `limit + 1` bytes are ever
/// held); `Integrity` for a frame that does not decode.
pub(crate) fn unpack<'a>(
    name: &str,
    stored: &'a [u8],
    limit: u64,
) -> Result<Cow<'a, [u8]>, SnapshotError> {
    if !stored.starts_with(&ZSTD_MAGIC) {
        return Ok(Cow::Borrowed(stored));
    }
    let corrupt = |err: std::io::Error| SnapshotError::Integrity {
        path: name.to_string(),
        reason: format!("compressed object does not decode: {err}"),
    };
    let mut decoder = zstd::stream::read::Decoder::with_buffer(stored).map_err(corrupt)?;
    decoder.window_log_max(MAX_WINDOW_LOG).map_err(corrupt)?;
    let mut decoded = Vec::new();
    decoder
        .take(limit.saturating_add(1))
        .read_to_end(&mut decoded)
        .map_err(corrupt)?;
    if decoded.len() as u64 > limit {
        return Err(over_limit(SnapshotError::ObjectTooLarge {
            object: format!("{name} (decompressed)"),
            size: decoded.len() as u64,
            limit,
        }));
    }
    Ok(Cow::Owned(decoded))
}

impl SnapshotStore {
    /// A manifest page or group: fetched within `limit` stored bytes, decoded within `limit`
    /// bytes, and verified to hash to `sha256` (`Integrity` otherwise).
    pub(crate) async fn packed_blob_within(
        &self,
        sha256: &str,
        limit: u64,
    ) -> Result<Vec<u8>, SnapshotError> {
        self.verified_blob(sha256, limit, |name, stored| {
            Ok(unpack(name, &stored, limit)?.into_owned())
        })
        .await
    }

    /// Store a manifest page or group (`raw`, hashing to `sha256`) compressed, unless the
    /// store holds it already, compressed or as written by an earlier writer; returns the bytes
    /// uploaded (0 when it was there). Only a page the store lacks is compressed.
    pub(crate) async fn put_packed_if_missing(
        &self,
        sha256: &str,
        raw: &[u8],
    ) -> Result<u64, SnapshotError> {
        let name = blob_object_name(sha256);
        let held = self.object_info(&name).await?;
        let reusable = held.as_ref().and_then(reusable_size);
        if reusable == Some(raw.len() as u64) {
            return Ok(0);
        }
        let packed = pack(raw);
        if reusable == Some(packed.len() as u64) {
            return Ok(0);
        }
        self.put_object(&name, &packed, held.as_ref()).await?;
        Ok(packed.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_protocol::snapshot::sha256_hex;

    const LIMIT: u64 = 1 << 20;

    fn page_json(entries: usize) -> Vec<u8> {
        let entries: Vec<serde_json::Value> = (0..entries)
            .map(|i| {
                serde_json::json!({
                    "path": format!("src/module{}/file{i:05}.rs", i % 7),
                    "mode": 420,
                    "size": i * 31,
                    "sha256": sha256_hex(i.to_string().as_bytes()),
                })
            })
            .collect();
        serde_json::to_vec(&entries).unwrap()
    }

    /// A zstd frame of `bytes` zero bytes: a few hundred bytes stored.
    fn zeros_frame(bytes: usize) -> Vec<u8> {
        zstd::bulk::compress(&vec![0u8; bytes], 3).unwrap()
    }

    #[test]
    fn what_is_stored_decodes_to_what_was_written() {
        let page = page_json(32);
        let packed = pack(&page);
        assert!(packed.starts_with(&ZSTD_MAGIC));
        assert!(
            packed.len() * 2 < page.len(),
            "{} -> {}",
            page.len(),
            packed.len()
        );
        let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
            ("a page, compressed", packed, page.clone()),
            ("a page as written before", page.clone(), page.clone()),
            (
                "a group as written before",
                b"[\"ab\"]".to_vec(),
                b"[\"ab\"]".to_vec(),
            ),
            ("empty", Vec::new(), Vec::new()),
            (
                "a frame of exactly the cap",
                zeros_frame(LIMIT as usize),
                vec![0; LIMIT as usize],
            ),
        ];
        for (case, stored, want) in cases {
            let got = unpack("blob/x", &stored, LIMIT).unwrap();
            assert_eq!(got.as_ref(), want.as_slice(), "{case}");
        }
        // Nothing compresses below its own size: stored as it is, still read.
        assert_eq!(pack(b"[]"), b"[]".to_vec());
    }

    #[test]
    fn hostile_frames_are_refused_with_their_kind() {
        let truncated = {
            let packed = pack(&page_json(32));
            packed[..packed.len() / 2].to_vec()
        };
        let mut garbage = ZSTD_MAGIC.to_vec();
        garbage.extend_from_slice(b"not a frame at all, just bytes");
        let mut trailing = pack(&page_json(32));
        trailing.extend_from_slice(b"junk");
        let bomb = zeros_frame(16 << 20);
        assert!(bomb.len() < 16 * 1024, "{} stored bytes", bomb.len());
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("garbage after the magic", garbage, "integrity"),
            ("a truncated frame", truncated, "integrity"),
            ("trailing junk", trailing, "integrity"),
            ("16 MiB of zeros under a 1 MiB cap", bomb, "too large"),
            (
                "one byte over the cap",
                zeros_frame(LIMIT as usize + 1),
                "too large",
            ),
        ];
        for (case, stored, want) in cases {
            let kind = match unpack("blob/x", &stored, LIMIT) {
                Err(SnapshotError::Integrity { path, reason }) => {
                    assert_eq!(path, "blob/x", "{case}");
                    assert!(reason.contains("does not decode"), "{case}: {reason}");
                    "integrity"
                }
                Err(SnapshotError::ObjectTooLarge {
                    object,
                    size,
                    limit,
                }) => {
                    assert_eq!(object, "blob/x (decompressed)", "{case}");
                    assert_eq!((size, limit), (LIMIT + 1, LIMIT), "{case}");
                    "too large"
                }
                other => panic!("{case}: {:?} bytes", other.map(|bytes| bytes.len())),
            };
            assert_eq!(kind, want, "{case}");
        }
    }

    #[test]
    fn a_frame_asking_for_a_window_over_the_cap_is_refused() {
        // Long-distance matching with a 2^27 window over input that needs it.
        let mut input = vec![0u8; 0];
        let block: Vec<u8> = (0..(1u32 << 16)).flat_map(|i| i.to_le_bytes()).collect();
        for _ in 0..40 {
            input.extend_from_slice(&block);
        }
        let mut encoder = zstd::bulk::Compressor::new(1).unwrap();
        encoder
            .set_parameter(zstd::zstd_safe::CParameter::WindowLog(27))
            .unwrap();
        encoder
            .set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(false))
            .unwrap();
        let wide = encoder.compress(&input).unwrap();
        match unpack("blob/x", &wide, 64 << 20) {
            Err(SnapshotError::Integrity { reason, .. }) => {
                assert!(reason.contains("does not decode"), "{reason}")
            }
            other => panic!("{:?}", other.map(|bytes| bytes.len())),
        }
        // The same input in a frame with a smaller window reads.
        let narrow = zstd::bulk::compress(&input, 3).unwrap();
        assert_eq!(
            unpack("blob/x", &narrow, 64 << 20).unwrap().len(),
            input.len()
        );
    }
}
