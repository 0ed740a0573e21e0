//! Mends five ways a small model's tool call breaks a Python file, each of which Python
//! rejects outright, so mending cannot change a program that would have run:
//!
//! - **A line break inside a one-line string literal.** A model that writes `"content":
//!   "...print(a + '\n')"` means the two characters `\n` in the code, but JSON decodes them to a
//!   line break (`SyntaxError: unterminated string literal`), and its fixes tend to re-send the
//!   same JSON. Written as the escape `\n`, when the literal closes on the very next line.
//! - **The two characters `\n` outside any string literal**, where the model escaped a line
//!   break twice (`"def main():\\n    if ..."`). Outside a literal Python allows a backslash only
//!   right before a line break (`SyntaxError: unexpected character after line continuation
//!   character`). Written as line breaks.
//! - **A NUL character inside a string literal** (`"\u0000"` in JSON for the regex
//!   `[^\0-\x7F]`; `SyntaxError: source code cannot contain null bytes`). Written as the
//!   escape `\x00`.
//! - **A compound statement after `;` or after another statement's `:` on one line**
//!   (`import json; with open(...) as f: for line in f: ...`, `SyntaxError: invalid syntax`).
//!   Each such `with`, `for`, `if`, `while`, `def`, `class` or `try` goes on a line of its own
//!   (one level deeper after a `:`), which is what the one-liner means.
//! - **A quote dropped from a short literal** (`SyntaxError: unterminated string literal`), in
//!   the two shapes the default 1.5B model sends: `".join(` for `"".join(` (a literal opening
//!   right before `.join(` that does not close on its line gets its second quote), and
//!   `split(',` at the end of a line for `split(',')` (a literal of one or two characters, no
//!   letter or digit among them, opening right after `(` and running to the end of its line,
//!   which does not close on the next line either, is closed, and so is that `(`).
//!
//! Anything the scanner cannot place (a quote that does not close on the next line) leaves the
//! whole text as written. Pure.

/// Mended text and where each mend was made.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Mended {
    pub text: String,
    /// 1-based lines (of the mended text) whose line break inside a literal became `\n`.
    pub lines: Vec<usize>,
    /// 1-based lines (of the text as sent) that held `\n` outside any literal, once per line.
    pub escaped_breaks: Vec<usize>,
    /// 1-based lines (of the text as sent) with a NUL character inside a literal.
    pub nul_chars: Vec<usize>,
    /// 1-based lines (of the text as sent) where a compound statement followed `;` or `:`.
    pub compound_lines: Vec<usize>,
    /// 1-based lines (of the text as sent) where a short literal's dropped quote was put back.
    pub dropped_quotes: Vec<usize>,
}

impl Mended {
    fn is_empty(&self) -> bool {
        self.lines.is_empty()
            && self.escaped_breaks.is_empty()
            && self.nul_chars.is_empty()
            && self.compound_lines.is_empty()
            && self.dropped_quotes.is_empty()
    }
}

fn push_once(lines: &mut Vec<usize>, line: usize) {
    if lines.last() != Some(&line) {
        lines.push(line);
    }
}

/// `src` with the five mends above applied; None when there is nothing to mend, or when the
/// scanner cannot tell where a literal ends.
pub(crate) fn mend_python_source(src: &str) -> Option<Mended> {
    let chars: Vec<char> = src.chars().collect();
    let mut scan = Scanner {
        chars: &chars,
        m: Mended {
            text: String::with_capacity(src.len() + 8),
            ..Mended::default()
        },
        line: 1,
        sent: 1,
        depth: 0,
        i: 0,
    };
    while scan.i < chars.len() {
        let c = chars[scan.i];
        match c {
            '#' => {
                scan.comment();
                continue;
            }
            '\\' => {
                scan.escape();
                continue;
            }
            '\'' | '"'
                if chars.get(scan.i + 1) == Some(&c) && chars.get(scan.i + 2) == Some(&c) =>
            {
                scan.triple_quoted(c);
                continue;
            }
            '\'' | '"' => {
                if !scan.dropped_quote(c) {
                    scan.one_line_literal(c)?;
                }
                continue;
            }
            '(' | '[' | '{' => scan.depth += 1,
            ')' | ']' | '}' => scan.depth = scan.depth.saturating_sub(1),
            ';' | ':' if scan.depth == 0 && scan.compound_after(c) => continue,
            '\n' => {
                scan.line += 1;
                scan.sent += 1;
            }
            _ => {}
        }
        scan.m.text.push(c);
        scan.i += 1;
    }
    (!scan.m.is_empty()).then_some(scan.m)
}

/// The scan of one text: where it is, and what it has written and mended so far.
struct Scanner<'a> {
    chars: &'a [char],
    m: Mended,
    /// Lines of the mended text so far.
    line: usize,
    /// Lines of the text as sent so far.
    sent: usize,
    /// Open brackets outside literals: a `:` or `;` inside them is not a statement's.
    depth: usize,
    i: usize,
}

impl Scanner<'_> {
    /// A comment at `i`, to the end of the line.
    fn comment(&mut self) {
        while self.i < self.chars.len() && self.chars[self.i] != '\n' {
            self.m.text.push(self.chars[self.i]);
            self.i += 1;
        }
    }

    /// A backslash outside literals at `i`, and the character after it.
    fn escape(&mut self) {
        let next = self.chars.get(self.i + 1).copied();
        // `\n` twice escaped: a line break, unless a quote follows (the scanner may have
        // lost a nested f-string's quotes there; leave it).
        if next == Some('n') && !matches!(self.chars.get(self.i + 2), Some('\'' | '"')) {
            self.m.text.push('\n');
            push_once(&mut self.m.escaped_breaks, self.sent);
            self.line += 1;
            self.i += 2;
            return;
        }
        self.m.text.push('\\');
        if let Some(next) = next {
            if next == '\n' {
                self.line += 1;
                self.sent += 1;
            }
            self.m.text.push(next);
        }
        self.i += 2;
    }

    /// A triple-quoted literal opening at `i`: kept, NUL characters escaped.
    fn triple_quoted(&mut self, quote: char) {
        let end = triple_end(self.chars, self.i + 3, quote);
        for &ch in &self.chars[self.i..end] {
            if ch == '\n' {
                self.line += 1;
                self.sent += 1;
            }
            self.push_literal_char(ch);
        }
        self.i = end;
    }

    /// A one-line literal opening at `i`: a line break in it becomes `\n` when the literal
    /// closes on the next line (`None` when it does not: the text is left as written).
    fn one_line_literal(&mut self, quote: char) -> Option<()> {
        self.m.text.push(quote);
        self.i += 1;
        while self.i < self.chars.len() {
            let ch = self.chars[self.i];
            if ch == '\\' {
                self.m.text.push(ch);
                if let Some(&next) = self.chars.get(self.i + 1) {
                    if next == '\n' {
                        self.line += 1;
                        self.sent += 1;
                    }
                    self.m.text.push(next);
                }
                self.i += 2;
                continue;
            }
            if ch == quote {
                self.m.text.push(ch);
                self.i += 1;
                break;
            }
            if ch == '\n' {
                if !closes_on_next_line(self.chars, self.i + 1, quote) {
                    return None;
                }
                // Counted in the file as written, where this break is gone.
                self.m.lines.push(self.line);
                self.sent += 1;
                self.m.text.push_str("\\n");
                self.i += 1;
                continue;
            }
            self.push_literal_char(ch);
            self.i += 1;
        }
        Some(())
    }

    /// A one-line literal opening at `i` that does not close on its line, in one of the two
    /// shapes of a dropped quote (see the module's note): written mended, true. False (nothing
    /// written) for any other literal.
    fn dropped_quote(&mut self, quote: char) -> bool {
        let start = self.i + 1;
        let end = start
            + self.chars[start..]
                .iter()
                .take_while(|c| **c != '\n')
                .count();
        let rest = &self.chars[start..end];
        if rest.iter().any(|c| *c == quote || *c == '\\') {
            return false;
        }
        let before = self.m.text.chars().last();
        if rest.starts_with(&JOIN_CALL) && !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            self.m.text.push(quote);
            self.m.text.push(quote);
            push_once(&mut self.m.dropped_quotes, self.sent);
            self.i = start;
            return true;
        }
        let short_separator =
            (1..=2).contains(&rest.len()) && rest.iter().all(|c| !c.is_alphanumeric());
        if before == Some('(')
            && short_separator
            && !closes_on_next_line(self.chars, end + 1, quote)
        {
            self.m.text.push(quote);
            self.m.text.extend(rest);
            self.m.text.push(quote);
            self.m.text.push(')');
            self.depth = self.depth.saturating_sub(1);
            push_once(&mut self.m.dropped_quotes, self.sent);
            self.i = end;
            return true;
        }
        false
    }

    /// A character inside a literal: a NUL becomes the escape `\x00`.
    fn push_literal_char(&mut self, ch: char) {
        if ch == '\0' {
            push_once(&mut self.m.nul_chars, self.sent);
            self.m.text.push_str("\\x00");
        } else {
            self.m.text.push(ch);
        }
    }

    /// `;` or `:` at `i` outside brackets: when a compound statement follows on the same line
    /// (`import json; with ...:` or `with ...: for ...:`), it goes on a line of its own, one
    /// level deeper after a `:`, as the one-liner means. True when it did.
    fn compound_after(&mut self, c: char) -> bool {
        let Some(keyword) = compound_keyword_at(self.chars, self.i + 1) else {
            return false;
        };
        let indent = current_indent(&self.m.text);
        if c == ':' {
            self.m.text.push(':');
        }
        self.m.text.push('\n');
        self.m.text.push_str(&indent);
        if c == ':' {
            self.m.text.push_str("    ");
        }
        push_once(&mut self.m.compound_lines, self.sent);
        self.line += 1;
        self.i = keyword;
        true
    }
}

/// What follows the lone quote of `".join(` (a dropped `""`).
const JOIN_CALL: [char; 6] = ['.', 'j', 'o', 'i', 'n', '('];

/// Statements Python allows only at the start of a line (after `;` or a header's `:` they are
/// a `SyntaxError`).
const COMPOUND_KEYWORDS: [&str; 7] = ["with", "for", "if", "while", "def", "class", "try"];

/// Where a compound statement's keyword starts, when one follows `from` after spaces.
fn compound_keyword_at(chars: &[char], from: usize) -> Option<usize> {
    let start = from
        + chars[from.min(chars.len())..]
            .iter()
            .take_while(|c| matches!(c, ' ' | '\t'))
            .count();
    let is_name = |c: &char| c.is_alphanumeric() || *c == '_';
    let word: String = chars[start.min(chars.len())..]
        .iter()
        .take_while(|c| is_name(c))
        .collect();
    COMPOUND_KEYWORDS.contains(&word.as_str()).then_some(start)
}

/// The leading spaces and tabs of the last line of `text`.
fn current_indent(text: &str) -> String {
    let last = text.rsplit('\n').next().unwrap_or_default();
    last.chars()
        .take_while(|c| matches!(c, ' ' | '\t'))
        .collect()
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
            let got = mend_python_source(src);
            match want {
                None => assert_eq!(got, None, "{src:?}"),
                Some(text) => assert_eq!(
                    got,
                    Some(Mended {
                        text: text.to_string(),
                        lines: lines.to_vec(),
                        ..Mended::default()
                    }),
                    "{src:?}"
                ),
            }
        }
    }

    #[test]
    fn twice_escaped_breaks_and_nul_characters_table() {
        // (source, mended source or None, lines with `\n` outside a literal, lines with a
        // NUL character in one)
        // (source, mended source or None, escaped-break lines, NUL lines)
        type Case = (
            &'static str,
            Option<&'static str>,
            &'static [usize],
            &'static [usize],
        );
        let cases: [Case; 9] = [
            // Sitting p's checkage.py: the function on one line of `\n`s.
            (
                "import sys\n\ndef main(age):\\n    if age >= 18:\\n        print('adult')\\n    else:\\n        print('minor')\nmain(int(sys.argv[1]))\n",
                Some("import sys\n\ndef main(age):\n    if age >= 18:\n        print('adult')\n    else:\n        print('minor')\nmain(int(sys.argv[1]))\n"),
                &[3],
                &[],
            ),
            // The whole file on one line.
            ("x = 1\\ny = 2\\n", Some("x = 1\ny = 2\n"), &[1], &[]),
            // A `\n` inside a literal is the code's own escape and stays.
            ("print('a\\nb')\nprint(\"c\\n\")\n", None, &[], &[]),
            ("s = '''x\\ny'''\n", None, &[], &[]),
            // A line continuation stays.
            ("x = 1 + \\\n    2\n", None, &[], &[]),
            // In a comment it stays.
            ("# a\\nb\nx = 1\n", None, &[], &[]),
            // Before a quote it is left (a nested f-string's quotes may have fooled the scan).
            ("x = f\"{d[\"k\"]}{\"\\n\"}\"\n", None, &[], &[]),
            // Sitting p's textutils.py: JSON's `\u0000` for the regex's `\0`.
            (
                "s = re.sub(r\"[^\u{0}-\\u007F]+\", '', s)\n",
                Some("s = re.sub(r\"[^\\x00-\\u007F]+\", '', s)\n"),
                &[],
                &[1],
            ),
            // A tab or another control character inside a literal is valid Python.
            ("s = 'a\tb\u{1}c'\n", None, &[], &[]),
        ];
        for (src, want, escaped, nul) in cases {
            let got = mend_python_source(src);
            match want {
                None => assert_eq!(got, None, "{src:?}"),
                Some(text) => assert_eq!(
                    got,
                    Some(Mended {
                        text: text.to_string(),
                        lines: Vec::new(),
                        escaped_breaks: escaped.to_vec(),
                        nul_chars: nul.to_vec(),
                        compound_lines: Vec::new(),
                        dropped_quotes: Vec::new(),
                    }),
                    "{src:?}"
                ),
            }
        }
    }

    #[test]
    fn dropped_quotes_of_short_literals_table() {
        // (source, mended source or None, lines as sent)
        let cases: [(&str, Option<&str>, &[usize]); 9] = [
            // The calibration's two shapes.
            (
                "def slug(s):\n    return \".join(c for c in s if c.isalnum())\n\ndef g():\n    pass\n",
                Some("def slug(s):\n    return \"\".join(c for c in s if c.isalnum())\n\ndef g():\n    pass\n"),
                &[2],
            ),
            (
                "with open(p) as f:\n    header = f.readline().strip().split(',\n    for line in f:\n        pass\n",
                Some("with open(p) as f:\n    header = f.readline().strip().split(',')\n    for line in f:\n        pass\n"),
                &[2],
            ),
            ("parts = s.split('\t\n", Some("parts = s.split('\t')\n"), &[1]),
            ("x = ', '.join(y)\nz = '.join(w)\n", Some("x = ', '.join(y)\nz = ''.join(w)\n"), &[2]),
            // Valid Python is never touched.
            ("s = \"\".join(parts)\nt = line.split(',')\n", None, &[]),
            ("doc = \"\"\".join( and split(',\n\"\"\"\n", None, &[]),
            // A literal that closes on the next line is a line break inside it (the older mend).
            ("print(',\n')\n", Some("print(',\\n')\n"), &[]),
            // Not the shapes: a word, a prefix, a longer literal; left as written.
            ("x = f('abc\ny = 1\n", None, &[]),
            ("x = split(b',\ny = 1\n", None, &[]),
        ];
        for (src, want, lines) in cases {
            let got = mend_python_source(src);
            assert_eq!(got.as_ref().map(|m| m.text.as_str()), want, "{src:?}");
            if let Some(m) = got {
                assert_eq!(m.dropped_quotes, lines, "{src:?}");
            }
        }
    }

    #[test]
    fn compound_statements_after_a_semicolon_or_colon_table() {
        // (source, mended source or None, lines as sent)
        let cases: [(&str, Option<&str>, &[usize]); 8] = [
            // Sitting q's to_json.py.
            (
                "import json; with open('p.json', 'w') as f: f.write('[]')\n",
                Some("import json\nwith open('p.json', 'w') as f: f.write('[]')\n"),
                &[1],
            ),
            // Sitting p's: a loop inside the `with`, statements after the loop's `:`.
            (
                "import json; with open('a') as f, open('b', 'w') as out: for line in f: x = line.split(','); out.write(x[0] + '\\n')",
                Some("import json\nwith open('a') as f, open('b', 'w') as out:\n    for line in f: x = line.split(','); out.write(x[0] + '\\n')"),
                &[1],
            ),
            // Indented: the new lines keep the line's indentation.
            (
                "def f(xs):\n    n = 0; for x in xs: n += x\n    return n\n",
                Some("def f(xs):\n    n = 0\n    for x in xs: n += x\n    return n\n"),
                &[2],
            ),
            // Valid one-liners are never touched.
            ("for x in xs: print(x); print('done')\n", None, &[]),
            ("ys = [x for x in xs if x]; d = {k: v for k, v in p}\n", None, &[]),
            ("f = lambda x: x if x else 0\nprint(f(1), 'a; if b: for')\n", None, &[]),
            ("if x: y = 1  # ; with z: for\n", None, &[]),
            // `format`, `iffy`: names that start like a keyword.
            ("x = 1; format(x); iffy = 2\n", None, &[]),
        ];
        for (src, want, lines) in cases {
            let got = mend_python_source(src);
            assert_eq!(got.as_ref().map(|m| m.text.as_str()), want, "{src:?}");
            if let Some(m) = got {
                assert_eq!(m.compound_lines, lines, "{src:?}");
            }
        }
    }
}
