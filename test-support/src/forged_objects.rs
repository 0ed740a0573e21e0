//! Writing a JetStream object store bucket as a hostile writer may (an executor can write the
//! snapshot bucket): any object under any name, and metadata that lies about an object's size.

use anyhow::Context;
use async_nats::jetstream;
use async_nats::jetstream::object_store::ObjectInfo;
use base64::Engine;

/// Store `bytes` as object `name` of `bucket`, as any writer of the bucket may.
pub async fn put_object(
    js: &jetstream::Context,
    bucket: &str,
    name: &str,
    bytes: &[u8],
) -> anyhow::Result<ObjectInfo> {
    let store = js.get_object_store(bucket).await?;
    let mut reader = bytes;
    Ok(store.put(name, &mut reader).await?)
}

/// Publish object `name`'s metadata again with `size` as its recorded size (its chunks stay
/// what they are), so it replaces the honest one.
pub async fn record_size(
    js: &jetstream::Context,
    bucket: &str,
    name: &str,
    size: usize,
) -> anyhow::Result<()> {
    rewrite_metadata(js, bucket, name, |info| info.size = size).await
}

/// Publish object `name`'s metadata again dated `age` ago, as an object an earlier writer
/// stored that long ago.
pub async fn date_back(
    js: &jetstream::Context,
    bucket: &str,
    name: &str,
    age: std::time::Duration,
) -> anyhow::Result<()> {
    let at = time::OffsetDateTime::now_utc() - age;
    rewrite_metadata(js, bucket, name, |info| info.modified = Some(at)).await
}

/// Object `name`'s metadata as `change` leaves it, published as the message an object put ends
/// with: on `$O.<bucket>.M.<base64url(name)>` with the `Nats-Rollup: sub` header, so it
/// replaces the one before.
async fn rewrite_metadata(
    js: &jetstream::Context,
    bucket: &str,
    name: &str,
    change: impl FnOnce(&mut ObjectInfo),
) -> anyhow::Result<()> {
    let store = js.get_object_store(bucket).await?;
    let mut info = store.info(name).await.context("object to rewrite")?;
    change(&mut info);
    let subject = format!(
        "$O.{bucket}.M.{}",
        base64::engine::general_purpose::URL_SAFE.encode(name)
    );
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Rollup", "sub");
    js.publish_with_headers(subject, headers, serde_json::to_vec(&info)?.into())
        .await?
        .await?;
    Ok(())
}

/// Entries of one page of a paged snapshot manifest, at most (`MAX_PAGE_ENTRIES` in
/// `loopgate_snapshot::manifests`).
pub const PAGE_ENTRIES: usize = 1024;

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes))
}

/// Plant, in snapshot bucket `bucket`, a paged manifest listing `listed` pages of
/// [`PAGE_ENTRIES`] entries each (`listed * 1024` entries, each recorded as `entry_size`
/// bytes of the same never-stored content), of which only the first `present` pages are
/// stored (as `blob/<sha256>`): the rest exist only as digests in the index, so a reader that
/// fetches them fails on a missing page. Returns the snapshot id it is stored under
/// (`manifest/<id>`): the true id (the sha256 of the canonical flat manifest) when every page
/// is present, else a made-up one.
pub async fn plant_paged_manifest(
    js: &jetstream::Context,
    bucket: &str,
    listed: usize,
    present: usize,
    entry_size: u64,
) -> anyhow::Result<String> {
    let content = sha256_hex(b"planted");
    let mut pages = Vec::with_capacity(listed);
    // The canonical flat manifest: `{"v":1,"entries":[` + every entry, comma-joined + `]}`,
    // each entry with its fields in `ManifestEntry`'s order.
    let mut canonical = <sha2::Sha256 as sha2::Digest>::new();
    sha2::Digest::update(&mut canonical, br#"{"v":1,"entries":["#);
    for page in 0..listed {
        if page >= present {
            pages.push(sha256_hex(format!("absent page {page}").as_bytes()));
            continue;
        }
        let entries: Vec<String> = (0..PAGE_ENTRIES)
            .map(|i| {
                format!(
                    r#"{{"path":"p{page:07}/f{i:04}","mode":420,"size":{entry_size},"sha256":"{content}"}}"#
                )
            })
            .collect();
        let body = entries.join(",");
        if page > 0 {
            sha2::Digest::update(&mut canonical, b",");
        }
        sha2::Digest::update(&mut canonical, body.as_bytes());
        let bytes = format!("[{body}]").into_bytes();
        let digest = sha256_hex(&bytes);
        put_object(js, bucket, &format!("blob/{digest}"), &bytes).await?;
        pages.push(digest);
    }
    sha2::Digest::update(&mut canonical, b"]}");
    let id = if present >= listed {
        hex::encode(sha2::Digest::finalize(canonical))
    } else {
        sha256_hex(format!("planted index of {listed} pages").as_bytes())
    };
    let index = serde_json::to_vec(&serde_json::json!({"paged": 1, "v": 1, "pages": pages}))?;
    put_object(js, bucket, &format!("manifest/{id}"), &index).await?;
    Ok(id)
}
