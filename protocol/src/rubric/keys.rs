//! Plain text helpers the rubric's parts share: key normalisation and cutting on char
//! boundaries.

/// Lowercase letters and digits only: `Code_quality`, `code-quality`, `**Code Quality**` → `codequality`.
pub(crate) fn normalize_key(raw: &str) -> String {
    raw.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

pub(super) fn cut_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}
