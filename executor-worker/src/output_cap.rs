//! Bounded capture of tool output: keeps the head and the tail, drops the middle, so a command
//! that prints megabytes costs a fixed amount of memory and of the model's context.

use std::collections::VecDeque;

/// Collects bytes, keeping at most `cap / 2` from the start and `cap - cap / 2` from the end.
#[derive(Debug, Clone)]
pub struct CappedOutput {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl CappedOutput {
    pub fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        CappedOutput {
            head_cap,
            tail_cap: cap - head_cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total = self.total.saturating_add(bytes.len() as u64);
        if self.head.len() < self.head_cap {
            let take = bytes.len().min(self.head_cap - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_cap..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// Total bytes pushed, kept or not.
    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn omitted(&self) -> u64 {
        self.total - (self.head.len() + self.tail.len()) as u64
    }

    /// Head, a marker naming how much was dropped (when anything was), then tail; lossy UTF-8.
    pub fn render(&self) -> String {
        let head = String::from_utf8_lossy(&self.head);
        let tail_bytes: Vec<u8> = self.tail.iter().copied().collect();
        let tail = String::from_utf8_lossy(&tail_bytes);
        match self.omitted() {
            0 => format!("{head}{tail}"),
            n => format!("{head}\n[... {n} bytes omitted ...]\n{tail}"),
        }
    }
}

/// Cap a whole string the same way (e.g. a file read for the model).
pub fn cap_text(text: &str, cap: usize) -> String {
    let mut out = CappedOutput::new(cap);
    out.push(text.as_bytes());
    out.render()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn capping_table() {
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
            let mut out = CappedOutput::new(cap);
            for c in &chunks {
                out.push(c.as_bytes());
            }
            assert_eq!(out.render(), expected, "cap {cap} chunks {chunks:?}");
            let total: usize = chunks.iter().map(|c| c.len()).sum();
            assert_eq!(out.total(), total as u64);
        }
    }

    #[test]
    fn large_output_stays_bounded() {
        let mut out = CappedOutput::new(16 * 1024);
        let line = [b'x'; 1000];
        for _ in 0..10_000 {
            out.push(&line);
        }
        let rendered = out.render();
        assert!(rendered.len() < 16 * 1024 + 64);
        assert!(rendered.contains("bytes omitted"));
        assert_eq!(out.total(), 10_000_000);
    }

    #[test]
    fn cap_text_splits_multibyte_lossily() {
        let text = "é".repeat(10); // 20 bytes
        let capped = cap_text(&text, 5);
        assert!(capped.contains("omitted"));
        assert_eq!(cap_text("short", 100), "short");
    }
}
