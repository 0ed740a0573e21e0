//! Whether a Python file's text parses, by the host's own `python3` (the one the checks run):
//! the text goes in on stdin and is compiled to a syntax tree, never run. `write_file` and
//! `edit_file` refuse to turn a file that parses (or a new one) into one that does not, and
//! say where it breaks, as SWE-agent's linted edits do: a small model's unclosed bracket
//! otherwise fails every check of the file until an audit finds it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::agents::run::resolve_command;
use crate::tools::workspace::ToolError;

/// How long the compile may take before the text counts as unknown (never refused).
const COMPILE_TIMEOUT: Duration = Duration::from_secs(10);

/// Compiles stdin to a syntax tree; prints the first syntax error as one JSON line.
const COMPILE: &str = r#"
import ast, json, sys
try:
    compile(sys.stdin.buffer.read(), "<file>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
except (SyntaxError, ValueError) as e:
    print(json.dumps({"line": getattr(e, "lineno", None) or 0,
                      "column": getattr(e, "offset", None) or 0,
                      "message": getattr(e, "msg", None) or str(e)}))
"#;

/// Where a Python text stops parsing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub(crate) struct SyntaxProblem {
    /// 1-based; 0 when Python named no line.
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl SyntaxProblem {
    /// `line 3, column 9: '(' was never closed`, and the lines around it from `text`.
    pub(crate) fn describe(&self, text: &str) -> String {
        let mut out = match self.line {
            0 => self.message.clone(),
            line => format!("line {line}, column {}: {}", self.column, self.message),
        };
        if self.line > 0 {
            let first = self.line.saturating_sub(2).max(1);
            for (number, source) in text.lines().enumerate().skip(first - 1).take(5) {
                let number = number + 1;
                let mark = if number == self.line { ">" } else { " " };
                out.push_str(&format!("\n{mark}{number:>5} | {source}"));
            }
        }
        out
    }
}

/// The first syntax error of `text` as Python; None when it parses, and when no `python3` can
/// tell (none on PATH, or it failed or timed out): a write is never refused on a guess.
pub(crate) fn syntax_problem(text: &str) -> Option<SyntaxProblem> {
    let python = python3()?;
    let mut child = Command::new(python)
        .args(["-I", "-S", "-c", COMPILE])
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let fed = child
        .stdin
        .take()
        .map(|mut stdin| stdin.write_all(text.as_bytes()));
    let deadline = Instant::now() + COMPILE_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    if !status.is_some_and(|s| s.success()) || !matches!(fed, Some(Ok(()))) {
        return None;
    }
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut stdout).ok()?;
    serde_json::from_str(stdout.trim()).ok()
}

/// What a write of `after` over `before` (None: a new file) to the Python file `rel` may do:
/// Err when `after` does not parse and `before` did (or there was none); Ok with a note for
/// the tool's result when `after` does not parse but neither did `before` (the model may be
/// mending it, and nothing that parsed is lost); Ok("") otherwise, and for other files.
pub(crate) fn check_python_write(
    rel: &str,
    before: Option<&[u8]>,
    after: &str,
) -> Result<String, ToolError> {
    if !rel.ends_with(".py") {
        return Ok(String::new());
    }
    let Some(problem) = syntax_problem(after) else {
        return Ok(String::new());
    };
    let before_parses = before
        .is_none_or(|b| std::str::from_utf8(b).is_ok_and(|text| syntax_problem(text).is_none()));
    if before_parses {
        return Err(ToolError::WouldNotParse {
            path: rel.to_string(),
            problem: problem.describe(after),
        });
    }
    Ok(format!(
        " (it still does not parse as Python, at {}; it did not before either)",
        problem.describe(after)
    ))
}

/// `python3` on this process's PATH, looked up once (`agents::run::resolve_command`).
fn python3() -> Option<&'static PathBuf> {
    static PYTHON3: OnceLock<Option<PathBuf>> = OnceLock::new();
    PYTHON3
        .get_or_init(|| {
            let path = std::env::var("PATH").ok()?;
            resolve_command(Path::new("python3"), &path).ok()
        })
        .as_ref()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::print_stderr)]
    use super::*;

    #[test]
    fn python_says_where_a_text_stops_parsing() {
        if python3().is_none() {
            eprintln!("SKIP python_says_where_a_text_stops_parsing: no python3 on PATH");
            return;
        }
        let cases: [(&str, Option<usize>); 7] = [
            ("def f():\n    return 1\n", None),
            ("", None),
            ("match x:\n    case 1:\n        pass\n", None),
            ("def f(:\n    return 1\n", Some(1)),
            ("x = 1\ny = (2,\nz = 3\n", Some(2)),
            ("def f():\nreturn 1\n", Some(2)),
            ("x = 'a\0b'\n", Some(0)),
        ];
        for (text, line) in cases {
            let problem = syntax_problem(text);
            match line {
                None => assert_eq!(problem, None, "{text:?}"),
                Some(0) => assert!(problem.is_some(), "{text:?}"),
                Some(line) => assert_eq!(problem.map(|p| p.line), Some(line), "{text:?}"),
            }
        }
    }

    #[test]
    fn a_problem_shows_the_lines_around_it() {
        let problem = SyntaxProblem {
            line: 3,
            column: 5,
            message: "invalid syntax".into(),
        };
        let text = "a = 1\nb = 2\nc = = 3\nd = 4\ne = 5\nf = 6\n";
        assert_eq!(
            problem.describe(text),
            "line 3, column 5: invalid syntax\n     1 | a = 1\n     2 | b = 2\n>    3 | c = = 3\n     4 | d = 4\n     5 | e = 5"
        );
    }
}
