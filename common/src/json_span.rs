//! Finding JSON spans inside model prose: where a bracketed `{...}` / `[...]` span that opens at
//! a given byte ends, with strings and escapes respected. Pure; used by the manager-reply parser
//! and the rubric judge parser.

/// The end (exclusive) of the bracketed span opening at `start`, strings respected.
pub fn balanced_end(text: &str, start: usize) -> Option<usize> {
    let mut stack: Vec<u8> = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    for (offset, b) in text.as_bytes().get(start..)?.iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' => stack.push(b'}'),
            b'[' => stack.push(b']'),
            b'}' | b']' => {
                if stack.pop() != Some(*b) {
                    return None;
                }
                if stack.is_empty() {
                    return Some(start + offset + 1);
                }
            }
            _ => {}
        }
    }
    None
}
