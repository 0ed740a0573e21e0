//! Line breaks that a tool call's JSON put inside a one-line Python string literal. A model
//! that writes `"content": "...print(a + '\n')"` means the two characters `\n` in the code, but
//! JSON decodes them to a line break, and Python rejects the file (`SyntaxError: unterminated
//! string literal`). In the 2026-12-02 suite sitting the 1.5B model did this in every
//! `csv-to-json` episode (`json.dumps(row) + '\n'`), in both arms, and its fixes re-sent the
//! same JSON. A raw line break inside a one-line literal is never valid Python, so writing it
//! as the escape `\n` cannot change a program that would have run. Only a literal that closes
//! on the very next line is mended; anything else is left as written. Pure.

/// Mended text, and the 1-based lines (of the mended text) whose break was written as `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mended {
    pub text: String,
    pub lines: Vec<usize>,
}

/// `src` with each line break inside a one-line (not triple-quoted) string literal written as
/// the escape `\n`, when that literal closes on the next line; None when there is none.
pub(crate) fn escape_breaks_in_string_literals(src: &str) -> Option<Mended> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len() + 8);
    let mut lines = Vec::new();
    let mut line = 1usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '#' => {
                // A comment, to the end of the line.
                while i < chars.len() && chars[i] != '\n' {
                    out.push(chars[i]);
                    i += 1;
                }
                continue;
            }
            '\'' | '"' if chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c) => {
                let end = triple_end(&chars, i + 3, c);
                for &ch in &chars[i..end] {
                    if ch == '\n' {
                        line += 1;
                    }
                    out.push(ch);
                }
                i = end;
                continue;
            }
            '\'' | '"' => {
                out.push(c);
                i += 1;
                while i < chars.len() {
                    let ch = chars[i];
                    if ch == '\\' {
                        out.push(ch);
                        if let Some(&next) = chars.get(i + 1) {
                            if next == '\n' {
                                line += 1;
                            }
                            out.push(next);
                        }
                        i += 2;
                        continue;
                    }
                    if ch == c {
                        out.push(ch);
                        i += 1;
                        break;
                    }
                    if ch == '\n' {
                        if !closes_on_next_line(&chars, i + 1, c) {
                            return None;
                        }
                        // Counted in the file as written, where this break is gone.
                        lines.push(line);
                        out.push_str("\\n");
                        i += 1;
                        continue;
                    }
                    out.push(ch);
                    i += 1;
                }
                continue;
            }
            '\n' => line += 1,
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    (!lines.is_empty()).then_some(Mended { text: out, lines })
}

/// Index just past the triple quote closing the literal whose body starts at `from`.
fn triple_end(chars: &[char], from: usize, quote: char) -> usize {
    let mut i = from;
    while i < chars.len() {
        if chars[i] == '\\' {
            i += 2;
            continue;
        }
        if chars[i] == quote && chars.get(i + 1) == Some(&quote) && chars.get(i + 2) == Some(&quote)
        {
            return i + 3;
        }
        i += 1;
    }
    chars.len()
}

/// Does an unescaped `quote` come before the next line break, from `from` on?
fn closes_on_next_line(chars: &[char], from: usize, quote: char) -> bool {
    let mut i = from;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '\n' => return false,
            c if c == quote => return true,
            _ => i += 1,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breaks_inside_one_line_literals_table() {
        // (source, mended source or None, lines)
        let cases: [(&str, Option<&str>, &[usize]); 10] = [
            // The csv-to-json episode: `'\n'` decoded to a line break.
            (
                "import json\nout.write(json.dumps(row) + '\n')\n",
                Some("import json\nout.write(json.dumps(row) + '\\n')\n"),
                &[2],
            ),
            ("print(\"a\nb\")\n", Some("print(\"a\\nb\")\n"), &[1]),
            (
                "x = 'a'\ny = '\n'\nz = \"\n\"\n",
                Some("x = 'a'\ny = '\\n'\nz = \"\\n\"\n"),
                &[2, 3],
            ),
            // Valid Python is never touched.
            ("print('a\\nb')\n", None, &[]),
            ("s = '''one\ntwo'''\nt = \"\"\"x\n\"\"\"\n", None, &[]),
            ("# it's a comment\nprint('ok')\n", None, &[]),
            ("s = 'abc\\\ndef'\n", None, &[]),
            ("d = \"it's\"\n", None, &[]),
            // A quote that does not close on the next line is not guessed at.
            ("x = 'abc\ny = 2\nz = 3\n", None, &[]),
            // After a docstring with quotes in it, the break is still found.
            (
                "def f():\n    \"\"\"Say 'hi'.\"\"\"\n    return 'a' + '\n'\n",
                Some("def f():\n    \"\"\"Say 'hi'.\"\"\"\n    return 'a' + '\\n'\n"),
                &[3],
            ),
        ];
        for (src, want, lines) in cases {
            let got = escape_breaks_in_string_literals(src);
            match want {
                None => assert_eq!(got, None, "{src:?}"),
                Some(text) => assert_eq!(
                    got,
                    Some(Mended {
                        text: text.to_string(),
                        lines: lines.to_vec()
                    }),
                    "{src:?}"
                ),
            }
        }
    }
}
