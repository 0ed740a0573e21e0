//! How rubric dimension names compare: by their letters and digits only.

/// Lowercase letters and digits only: `Code_quality`, `code-quality`, `**Code Quality**` → `codequality`.
pub fn normalize_key(raw: &str) -> String {
    raw.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}
