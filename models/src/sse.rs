//! A server-sent-events decoder fed with the body's byte chunks as they arrive (chunks may split
//! lines and UTF-8 sequences anywhere). Pure.

/// One event: its `event:` name (if any) and its `data:` lines joined with `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the line being received.
    partial: Vec<u8>,
    event: Option<String>,
    data: Vec<String>,
}

/// Lines longer than this are cut (a guard against a server that never sends a newline).
const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

impl SseDecoder {
    pub fn new() -> Self {
        SseDecoder::default()
    }

    /// Feeds a chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for &byte in chunk {
            if byte == b'\n' {
                let line = std::mem::take(&mut self.partial);
                self.line(&line, &mut events);
            } else if self.partial.len() < MAX_LINE_BYTES {
                self.partial.push(byte);
            }
        }
        events
    }

    /// Ends the stream: a last event without its blank line is still delivered.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let mut events = Vec::new();
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line, &mut events);
        }
        self.line(b"", &mut events);
        events.pop()
    }

    fn line(&mut self, raw: &[u8], events: &mut Vec<SseEvent>) {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line = String::from_utf8_lossy(raw);
        if line.is_empty() {
            if !self.data.is_empty() || self.event.is_some() {
                events.push(SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data).join("\n"),
                });
            }
            return;
        }
        if line.starts_with(':') {
            return; // comment / keep-alive
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => self.data.push(value.to_string()),
            "event" => self.event = Some(value.to_string()),
            _ => {} // id, retry: not needed here
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: name.map(str::to_string),
            data: data.to_string(),
        }
    }

    #[test]
    fn decode_table() {
        type Case<'a> = (&'a str, Vec<&'a [u8]>, Vec<SseEvent>);
        let cases: Vec<Case> = vec![
            (
                "two data events",
                vec![b"data: {\"a\":1}\n\ndata: [DONE]\n\n"],
                vec![event(None, "{\"a\":1}"), event(None, "[DONE]")],
            ),
            (
                "named event split across chunks, CRLF",
                vec![b"event: message_st", b"art\r\ndata: {\"x\"", b":2}\r\n\r\n"],
                vec![event(Some("message_start"), "{\"x\":2}")],
            ),
            (
                "comments and unknown fields ignored; multi-line data",
                vec![b": ping\nid: 7\ndata: a\ndata: b\n\n"],
                vec![event(None, "a\nb")],
            ),
            (
                "utf-8 split inside a character",
                vec![b"data: caf\xc3", b"\xa9\n\n"],
                vec![event(None, "café")],
            ),
            (
                "no space after colon",
                vec![b"data:x\n\n"],
                vec![event(None, "x")],
            ),
        ];
        for (name, chunks, want) in cases {
            let mut decoder = SseDecoder::new();
            let got: Vec<SseEvent> = chunks.iter().flat_map(|c| decoder.push(c)).collect();
            assert_eq!(got, want, "{name}");
            assert_eq!(decoder.finish(), None, "{name}");
        }
    }

    #[test]
    fn finish_flushes_an_unterminated_event() {
        let mut decoder = SseDecoder::new();
        assert!(decoder.push(b"data: tail").is_empty());
        assert_eq!(decoder.finish(), Some(event(None, "tail")));
    }
}
