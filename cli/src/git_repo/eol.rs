//! What `git add` would store for a file the run wrote, pure: a path `.gitattributes` marks
//! `text` (or `eol=...`) has CRLF line ends normalized to LF; `text=auto` does the same for
//! content that is not binary, unless the start commit stored that path with CRLF (git's
//! "safe" auto rule); `-text` and `binary` keep the bytes as they are, as does a path with no
//! attribute.

use std::borrow::Cow;

/// A path's `text` attribute, and whether `eol` is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextAttr {
    /// `text`, or `eol=lf|crlf`.
    Text,
    /// `text=auto`.
    Auto,
    /// `-text` (also `binary`).
    Binary,
    /// No attribute.
    Unspecified,
}

/// Bytes git looks at to tell binary content.
const SNIFF_BYTES: usize = 8000;

/// git's test: a NUL byte in the first 8000 bytes.
pub fn looks_binary(content: &[u8]) -> bool {
    content.iter().take(SNIFF_BYTES).any(|b| *b == 0)
}

/// The content as git would store it.
pub fn to_stored<'a>(attr: TextAttr, start_had_crlf: bool, content: &'a [u8]) -> Cow<'a, [u8]> {
    let normalize = match attr {
        TextAttr::Text => true,
        TextAttr::Auto => !start_had_crlf && !looks_binary(content),
        TextAttr::Binary | TextAttr::Unspecified => false,
    };
    if !normalize || !content.windows(2).any(|w| w == b"\r\n") {
        return Cow::Borrowed(content);
    }
    let mut out = Vec::with_capacity(content.len());
    let mut i = 0;
    while i < content.len() {
        if content[i] == b'\r' && content.get(i + 1) == Some(&b'\n') {
            i += 1;
            continue;
        }
        out.push(content[i]);
        i += 1;
    }
    Cow::Owned(out)
}

/// Whether stored content has CRLF line ends.
pub fn has_crlf(content: &[u8]) -> bool {
    content.windows(2).any(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_decide_normalization() {
        let crlf: &[u8] = b"a\r\nb\r\n";
        let binary: &[u8] = b"\0a\r\n";
        let cases: [(TextAttr, bool, &[u8], &[u8]); 8] = [
            (TextAttr::Text, false, crlf, b"a\nb\n"),
            (TextAttr::Text, true, crlf, b"a\nb\n"),
            (TextAttr::Text, false, b"lone\r", b"lone\r"),
            (TextAttr::Auto, false, crlf, b"a\nb\n"),
            (TextAttr::Auto, true, crlf, crlf),
            (TextAttr::Auto, false, binary, binary),
            (TextAttr::Binary, false, crlf, crlf),
            (TextAttr::Unspecified, false, crlf, crlf),
        ];
        for (attr, start_crlf, input, want) in cases {
            assert_eq!(
                to_stored(attr, start_crlf, input).as_ref(),
                want,
                "{attr:?} {start_crlf}"
            );
        }
        assert!(has_crlf(crlf) && !has_crlf(b"a\nb\r"));
    }
}
