//! Image parts in a stand-in request, as the real APIs take them: OpenAI `image_url` parts
//! (`{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}`, in a user
//! turn's content array) and Anthropic `image` blocks (`{"type": "image", "source": {"type":
//! "base64", "media_type", "data"}}`, in a turn's content or inside a `tool_result`'s content).
//! The server refuses a request whose image part is malformed with a 400, as the providers do;
//! [`StandInModel::images`](crate::StandInModel::images) returns the decoded images.

use base64::Engine;
use serde_json::Value;

use crate::standin::wire::Dialect;

/// One image a request carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedImage {
    /// e.g. `image/png`.
    pub media_type: String,
    /// The decoded bytes.
    pub bytes: Vec<u8>,
    /// The role of the turn it came in (`user`, or `tool` for an Anthropic `tool_result`).
    pub role: String,
}

/// The images of a request in either dialect, in order; `Err` names the first malformed part.
pub(crate) fn request_images(
    request: &Value,
    dialect: Dialect,
) -> Result<Vec<RecordedImage>, String> {
    let mut images = Vec::new();
    let messages = request
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for message in messages {
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(parts) = message.get("content").and_then(Value::as_array) else {
            continue;
        };
        for part in parts {
            match (dialect, part.get("type").and_then(Value::as_str)) {
                (Dialect::OpenAi, Some("image_url")) => {
                    if role != "user" {
                        return Err(format!(
                            "image_url parts are only allowed in user messages, not `{role}`"
                        ));
                    }
                    images.push(openai_image(part)?);
                }
                (Dialect::Anthropic, Some("image")) => images.push(anthropic_image(part, role)?),
                (Dialect::Anthropic, Some("tool_result")) => {
                    for block in part
                        .get("content")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        if block.get("type").and_then(Value::as_str) == Some("image") {
                            images.push(anthropic_image(block, "tool")?);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    Ok(images)
}

fn openai_image(part: &Value) -> Result<RecordedImage, String> {
    let url = part
        .pointer("/image_url/url")
        .and_then(Value::as_str)
        .ok_or("image_url part without image_url.url")?;
    let rest = url
        .strip_prefix("data:")
        .ok_or("image_url.url is not a data URL (the stand-in fetches nothing)")?;
    let (media_type, data) = rest
        .split_once(";base64,")
        .ok_or("image_url data URL is not `data:<type>;base64,<data>`")?;
    decoded(media_type, data, "user")
}

fn anthropic_image(block: &Value, role: &str) -> Result<RecordedImage, String> {
    let source = block.get("source").ok_or("image block without source")?;
    if source.get("type").and_then(Value::as_str) != Some("base64") {
        return Err("image source type must be base64 here".into());
    }
    let media_type = source
        .get("media_type")
        .and_then(Value::as_str)
        .ok_or("image source without media_type")?;
    let data = source
        .get("data")
        .and_then(Value::as_str)
        .ok_or("image source without data")?;
    decoded(media_type, data, role)
}

fn decoded(media_type: &str, data: &str, role: &str) -> Result<RecordedImage, String> {
    if !matches!(
        media_type,
        "image/png" | "image/jpeg" | "image/gif" | "image/webp"
    ) {
        return Err(format!("unsupported image media type `{media_type}`"));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| format!("image data is not base64: {e}"))?;
    if bytes.is_empty() {
        return Err("image data is empty".into());
    }
    Ok(RecordedImage {
        media_type: media_type.to_string(),
        bytes,
        role: role.to_string(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn image_parts_table() {
        let png = "iVBORw0KGgo=";
        let cases: Vec<(&str, Dialect, Value, Result<usize, ()>)> = vec![
            (
                "openai text only",
                Dialect::OpenAi,
                json!({"messages": [{"role": "user", "content": "hi"}]}),
                Ok(0),
            ),
            (
                "openai data url",
                Dialect::OpenAi,
                json!({"messages": [{"role": "user", "content": [
                    {"type": "text", "text": "x"},
                    {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png}")}}]}]}),
                Ok(1),
            ),
            (
                "openai http url",
                Dialect::OpenAi,
                json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/a.png"}}]}]}),
                Err(()),
            ),
            (
                "openai image in a tool message",
                Dialect::OpenAi,
                json!({"messages": [{"role": "tool", "content": [{"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png}")}}]}]}),
                Err(()),
            ),
            (
                "anthropic image in tool_result",
                Dialect::Anthropic,
                json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [
                    {"type": "text", "text": "saved"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]}]}]}),
                Ok(1),
            ),
            (
                "anthropic bad base64",
                Dialect::Anthropic,
                json!({"messages": [{"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "%%%"}}]}]}),
                Err(()),
            ),
            (
                "anthropic bad media type",
                Dialect::Anthropic,
                json!({"messages": [{"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "text/html", "data": png}}]}]}),
                Err(()),
            ),
        ];
        for (name, dialect, request, expected) in cases {
            let got = request_images(&request, dialect)
                .map(|images| images.len())
                .map_err(|_| ());
            assert_eq!(got, expected, "{name}");
        }
    }
}
