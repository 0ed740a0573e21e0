//! Bounded capture of a child process's output (a shell tool call, a CLI agent's stderr, an
//! acceptance check): the first `head` bytes and the last `tail` bytes are kept, the middle is
//! dropped and counted, so a command that prints megabytes costs a fixed amount of memory and
//! of the model's context. Pure.

use std::collections::VecDeque;

/// Collects bytes, keeping at most `head_limit` from the start and `tail_limit` from the end.
#[derive(Debug, Clone)]
pub struct OutputCap {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_limit: usize,
    tail_limit: usize,
    total: u64,
}

impl OutputCap {
    pub fn new(head_limit: usize, tail_limit: usize) -> Self {
        OutputCap {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_limit,
            tail_limit,
            total: 0,
        }
    }

    /// `cap` bytes in all: `cap / 2` from the start, the rest from the end.
    pub fn halves(cap: usize) -> Self {
        let head = cap / 2;
        OutputCap::new(head, cap - head)
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total = self.total.saturating_add(bytes.len() as u64);
        let head_room = self.head_limit.saturating_sub(self.head.len());
        if head_room > 0 {
            let take = head_room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.is_empty() {
            return;
        }
        if bytes.len() >= self.tail_limit {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_limit..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_limit);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// Total bytes pushed, kept or not.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes that were dropped from the middle.
    pub fn dropped(&self) -> u64 {
        self.total - (self.head.len() + self.tail.len()) as u64
    }

    fn marker(&self) -> Option<String> {
        match self.dropped() {
            0 => None,
            n => Some(format!("\n[... {n} bytes omitted ...]\n")),
        }
    }

    /// Everything kept, with a marker naming how much was dropped where bytes were dropped.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.head.len() + self.tail.len() + 64);
        out.extend_from_slice(&self.head);
        if let Some(marker) = self.marker() {
            out.extend_from_slice(marker.as_bytes());
        }
        out.extend(self.tail.iter());
        out
    }

    /// [`OutputCap::to_bytes`] as text (lossy UTF-8).
    pub fn render(&self) -> String {
        String::from_utf8_lossy(&self.to_bytes()).into_owned()
    }
}

/// Cap a whole string the same way (e.g. a file read for the model).
pub fn cap_text(text: &str, cap: usize) -> String {
    let mut out = OutputCap::halves(cap);
    out.push(text.as_bytes());
    out.render()
}

/// The last `max_chars` characters of `bytes` (lossy UTF-8), prefixed with `…` when cut.
pub fn output_excerpt(bytes: &[u8], max_chars: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let count = text.chars().count();
    if count <= max_chars {
        return text.into_owned();
    }
    let skip = count - max_chars;
    let start = text.char_indices().nth(skip).map(|(i, _)| i).unwrap_or(0);
    format!("…{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_capping_table() {
        // (cap, chunks, rendered)
        let cases: Vec<(usize, Vec<&str>, &str)> = vec![
            (10, vec!["hello"], "hello"),
            (10, vec!["0123456789"], "0123456789"),
            (
                10,
                vec!["0123456789abc"],
                "01234\n[... 3 bytes omitted ...]\n89abc",
            ),
            (
                10,
                vec!["01", "23", "45", "67", "89", "ab", "c"],
                "01234\n[... 3 bytes omitted ...]\n89abc",
            ),
            (
                4,
                vec!["ab", "cdefgh", "ij"],
                "ab\n[... 6 bytes omitted ...]\nij",
            ),
            (0, vec!["abc"], "\n[... 3 bytes omitted ...]\n"),
            (10, vec![], ""),
        ];
        for (cap, chunks, expected) in cases {
            let mut out = OutputCap::halves(cap);
            for c in &chunks {
                out.push(c.as_bytes());
            }
            assert_eq!(out.render(), expected, "cap {cap} chunks {chunks:?}");
            let total: usize = chunks.iter().map(|c| c.len()).sum();
            assert_eq!(out.total(), total as u64);
        }
    }

    #[test]
    fn head_and_tail_capping_table() {
        // (head, tail, pushes, expected kept bytes, dropped)
        type Case<'a> = (usize, usize, Vec<&'a [u8]>, &'a [u8], u64);
        let cases: Vec<Case> = vec![
            (4, 4, vec![b"abc"], b"abc", 0),
            (4, 4, vec![b"abcdefgh"], b"abcdefgh", 0),
            (4, 4, vec![b"abcdefghij"], b"abcdghij", 2),
            (
                4,
                4,
                vec![b"ab", b"cd", b"ef", b"gh", b"ij", b"kl"],
                b"abcdijkl",
                4,
            ),
            (2, 3, vec![b"0123456789", b"x"], b"0189x", 6),
            (0, 3, vec![b"abcdef"], b"def", 3),
            (3, 0, vec![b"abcdef"], b"abc", 3),
        ];
        for (i, (head, tail, pushes, kept, dropped)) in cases.into_iter().enumerate() {
            let mut cap = OutputCap::new(head, tail);
            for p in pushes {
                cap.push(p);
            }
            assert_eq!(cap.dropped(), dropped, "case {i}");
            let bytes = cap.to_bytes();
            if dropped == 0 {
                assert_eq!(bytes, kept, "case {i}");
            } else {
                let marker = format!("\n[... {dropped} bytes omitted ...]\n");
                let mut want = kept[..head.min(kept.len())].to_vec();
                want.extend_from_slice(marker.as_bytes());
                want.extend_from_slice(&kept[head.min(kept.len())..]);
                assert_eq!(bytes, want, "case {i}");
            }
        }
    }

    #[test]
    fn large_output_stays_bounded() {
        let mut out = OutputCap::halves(16 * 1024);
        let line = [b'x'; 1000];
        for _ in 0..10_000 {
            out.push(&line);
        }
        let rendered = out.render();
        assert!(rendered.len() < 16 * 1024 + 64);
        assert!(rendered.contains("bytes omitted"));
        assert_eq!(out.total(), 10_000_000);

        let (head, tail) = (16 * 1024, 48 * 1024);
        let mut cap = OutputCap::new(head, tail);
        let chunk = vec![b'x'; 8192];
        for _ in 0..1000 {
            cap.push(&chunk);
        }
        assert!(cap.to_bytes().len() <= head + tail + 64);
        assert_eq!(cap.dropped(), 8192 * 1000 - (head + tail) as u64);
    }

    #[test]
    fn cap_text_splits_multibyte_lossily() {
        let text = "é".repeat(10); // 20 bytes
        let capped = cap_text(&text, 5);
        assert!(capped.contains("omitted"));
        assert_eq!(cap_text("short", 100), "short");
    }

    #[test]
    fn excerpt_keeps_the_tail_on_char_boundaries() {
        assert_eq!(output_excerpt(b"short", 10), "short");
        assert_eq!(output_excerpt("aébc".as_bytes(), 2), "…bc");
        assert_eq!(output_excerpt("aébc".as_bytes(), 3), "…ébc");
        assert_eq!(output_excerpt(&[0xff, b'a'], 5), "\u{fffd}a");
    }
}
