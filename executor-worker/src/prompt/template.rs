//! The one template mechanism of the executor's prompts: a `.md` file beside the code that
//! owns the text, read in with `include_str!`, its `{name}` placeholders filled in one pass.

/// A template's text without the line break that ends its file (a `const fn`, so a template
/// can be a constant).
pub(crate) const fn text(template: &'static str) -> &'static str {
    match template.as_bytes() {
        [rest @ .., b'\n'] => match std::str::from_utf8(rest) {
            Ok(rest) => rest,
            Err(_) => template,
        },
        _ => template,
    }
}

/// `template` (see [`text`]) with each `{name}` of `values` replaced by its value, in one pass:
/// a value's own braces are never read as placeholders, and other braces stay as they are.
pub(crate) fn fill(template: &'static str, values: &[(&str, &str)]) -> String {
    let mut rest = text(template);
    let mut out = String::with_capacity(rest.len());
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let placeholder = values.iter().find(|(name, _)| {
            after
                .strip_prefix(name)
                .is_some_and(|tail| tail.starts_with('}'))
        });
        match placeholder {
            Some((name, value)) => {
                out.push_str(value);
                rest = &after[name.len() + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (template, values, filled)
    type Case = (
        &'static str,
        &'static [(&'static str, &'static str)],
        &'static str,
    );

    #[test]
    fn fill_table() {
        let cases: [Case; 5] = [
            ("a {x} b\n", &[("x", "1")], "a 1 b"),
            ("{x}{y}{x}", &[("x", "1"), ("y", "2")], "121"),
            // A value's braces stay as they are.
            ("{x} {y}", &[("x", "{y}"), ("y", "2")], "{y} 2"),
            // Braces that are no placeholder stay.
            ("{ {z} {x", &[("x", "1")], "{ {z} {x"),
            ("no line break", &[], "no line break"),
        ];
        for (template, values, want) in cases {
            assert_eq!(fill(template, values), want, "{template:?}");
        }
    }
}
