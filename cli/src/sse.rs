//! Incremental parser for `text/event-stream` (the subset the manager uses: `event`, `data`,
//! `id`, comments), fed with arbitrary byte chunks.

/// One dispatched server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// `event:` field; "message" when the server sent none.
    pub event: String,
    /// `data:` lines joined with `\n`.
    pub data: String,
    /// The last `id:` seen on the stream so far (SSE semantics: it persists across events).
    pub id: Option<String>,
}

/// Lines longer than this are cut (a misbehaving server can't make us buffer without limit).
const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a leading `\n` in the next chunk belongs to it.
    after_cr: bool,
    event: Option<String>,
    data: Vec<String>,
    has_data: bool,
    last_id: Option<String>,
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds bytes; returns the events completed by them, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for &byte in chunk {
            if self.after_cr {
                self.after_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' => self.end_line(&mut events),
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut events);
                }
                _ if self.line.len() < MAX_LINE_BYTES => self.line.push(byte),
                _ => {}
            }
        }
        events
    }

    fn end_line(&mut self, events: &mut Vec<SseEvent>) {
        let raw = std::mem::take(&mut self.line);
        let line = String::from_utf8_lossy(&raw);
        if line.is_empty() {
            if let Some(event) = self.dispatch() {
                events.push(event);
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                self.data.push(value.to_string());
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            _ => {}
        }
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        let data = std::mem::take(&mut self.data);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent {
            event: event
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "message".to_string()),
            data: data.join("\n"),
            id: self.last_id.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: &str, data: &str, id: Option<&str>) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: id.map(str::to_string),
        }
    }

    fn parse_all(stream: &[u8]) -> Vec<SseEvent> {
        SseParser::new().feed(stream)
    }

    #[test]
    fn parses_the_event_table() {
        let cases: Vec<(&str, Vec<SseEvent>)> = vec![
            (
                "event: log\ndata: {\"a\":1}\n\n",
                vec![ev("log", "{\"a\":1}", None)],
            ),
            ("data: plain\n\n", vec![ev("message", "plain", None)]),
            ("data:nospace\n\n", vec![ev("message", "nospace", None)]),
            ("data: a\ndata: b\n\n", vec![ev("message", "a\nb", None)]),
            ("event: log\r\ndata: x\r\n\r\n", vec![ev("log", "x", None)]),
            ("event: log\rdata: x\r\r", vec![ev("log", "x", None)]),
            (": keep-alive\n\n", vec![]),
            ("event: end\n\n", vec![]),
            (
                "id: 5-0\nevent: log\ndata: x\n\ndata: y\n\n",
                vec![ev("log", "x", Some("5-0")), ev("message", "y", Some("5-0"))],
            ),
            ("data\n\n", vec![ev("message", "", None)]),
            ("event: log\ndata: unterminated\n", vec![]),
            (
                "retry: 100\nunknown: z\ndata: q\n\n",
                vec![ev("message", "q", None)],
            ),
        ];
        for (stream, expected) in cases {
            assert_eq!(parse_all(stream.as_bytes()), expected, "{stream:?}");
        }
    }

    #[test]
    fn chunk_boundaries_do_not_matter() {
        let stream = "event: log\r\ndata: {\"round\":1}\r\n\r\n: ping\n\nevent: end\ndata: {\"state\":\"completed\"}\n\n";
        let whole = parse_all(stream.as_bytes());
        assert_eq!(whole.len(), 2);
        let bytes = stream.as_bytes();
        for size in 1..bytes.len() {
            let mut parser = SseParser::new();
            let mut got = Vec::new();
            for chunk in bytes.chunks(size) {
                got.extend(parser.feed(chunk));
            }
            assert_eq!(got, whole, "chunk size {size}");
        }
    }

    #[test]
    fn multibyte_utf8_split_across_chunks() {
        let stream = "data: héllo — ✓\n\n".as_bytes();
        let mut parser = SseParser::new();
        let mut got = Vec::new();
        for chunk in stream.chunks(1) {
            got.extend(parser.feed(chunk));
        }
        assert_eq!(got, vec![ev("message", "héllo — ✓", None)]);
    }
}
