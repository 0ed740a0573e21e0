//! Bounded capture of a check's output: the first `head` bytes and the last `tail` bytes are
//! kept, the middle is dropped and counted. Pure.

use std::collections::VecDeque;

/// Bytes of output kept from the start of a check's output.
pub const DEFAULT_HEAD_BYTES: usize = 16 * 1024;
/// Bytes of output kept from the end (where test runners print their summary).
pub const DEFAULT_TAIL_BYTES: usize = 48 * 1024;
/// Characters of the output tail that go into `Evidence::output_excerpt`.
pub const EXCERPT_CHARS: usize = 1500;

#[derive(Debug, Clone)]
pub struct OutputCap {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_limit: usize,
    tail_limit: usize,
    dropped: u64,
}

impl Default for OutputCap {
    fn default() -> Self {
        Self::new(DEFAULT_HEAD_BYTES, DEFAULT_TAIL_BYTES)
    }
}

impl OutputCap {
    pub fn new(head_limit: usize, tail_limit: usize) -> Self {
        OutputCap {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_limit,
            tail_limit,
            dropped: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
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
            let skip = bytes.len() - self.tail_limit;
            self.dropped += (self.tail.len() + skip) as u64;
            self.tail.clear();
            self.tail.extend(&bytes[skip..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_limit);
        self.tail.drain(..overflow);
        self.dropped += overflow as u64;
        self.tail.extend(bytes);
    }

    /// Bytes that were dropped from the middle.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Everything kept, with a marker where bytes were dropped.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.head.len() + self.tail.len() + 64);
        out.extend_from_slice(&self.head);
        if self.dropped > 0 {
            out.extend_from_slice(
                format!("\n[... {} bytes omitted ...]\n", self.dropped).as_bytes(),
            );
        }
        out.extend(self.tail.iter());
        out
    }
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
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn cap_table() {
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
        let mut cap = OutputCap::default();
        let chunk = vec![b'x'; 8192];
        for _ in 0..1000 {
            cap.push(&chunk);
        }
        assert!(cap.to_bytes().len() <= DEFAULT_HEAD_BYTES + DEFAULT_TAIL_BYTES + 64);
        assert_eq!(
            cap.dropped(),
            8192 * 1000 - (DEFAULT_HEAD_BYTES + DEFAULT_TAIL_BYTES) as u64
        );
    }

    #[test]
    fn excerpt_keeps_the_tail_on_char_boundaries() {
        assert_eq!(output_excerpt(b"short", 10), "short");
        assert_eq!(output_excerpt("aébc".as_bytes(), 2), "…bc");
        assert_eq!(output_excerpt("aébc".as_bytes(), 3), "…ébc");
        assert_eq!(output_excerpt(&[0xff, b'a'], 5), "\u{fffd}a");
    }
}
