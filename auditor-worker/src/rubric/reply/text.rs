//! Cutting the judge's text on char boundaries.

pub(super) fn cut_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}
