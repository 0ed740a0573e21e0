//! The function calls a goal writes out (`count_words('a  b') returns 3`), to evaluate on a
//! snapshot for the clause judge.
//!
//! A goal often states its requirement by example: what a function returns for a given
//! argument, before the fix or after it. A small judge reading the code guesses what a call
//! returns, and guesses wrong; the auditor instead evaluates each call the goal writes on the
//! candidate, in the checks' sandbox, and shows the judge what it returned. Only calls of a
//! function some Python file of the snapshot defines at its top level are evaluated, and only
//! with literal arguments (strings, numbers, lists, `True`/`False`/`None`): a goal's prose such
//! as "print() the result" names no workspace function and is left alone. Pure.

/// At most this many calls of one goal are evaluated.
const MAX_GOAL_CALLS: usize = 6;
/// A call longer than this is not an example.
const MAX_CALL_CHARS: usize = 200;

/// A call of a function as the goal writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GoalCall {
    /// `count_words`
    pub(crate) function: String,
    /// `count_words('a  b')`, exactly as written.
    pub(crate) call: String,
}

/// The calls `goal` writes with literal arguments, in order of first appearance, each once.
pub(crate) fn goal_calls(goal: &str) -> Vec<GoalCall> {
    let chars: Vec<(usize, char)> = goal.char_indices().collect();
    let mut out: Vec<GoalCall> = Vec::new();
    let mut i = 0;
    while i < chars.len() && out.len() < MAX_GOAL_CALLS {
        let (start, c) = chars[i];
        let starts_name = (c.is_ascii_alphabetic() || c == '_')
            && (i == 0 || !is_name_char(chars[i - 1].1) && chars[i - 1].1 != '.');
        if !starts_name {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < chars.len() && is_name_char(chars[j].1) {
            j += 1;
        }
        let function = &goal[start..chars.get(j).map_or(goal.len(), |(at, _)| *at)];
        if chars.get(j).map(|(_, c)| *c) != Some('(') {
            i = j;
            continue;
        }
        match literal_arguments_end(&chars, j) {
            Some(close) => {
                let end = chars.get(close + 1).map_or(goal.len(), |(at, _)| *at);
                let call = &goal[start..end];
                if call.len() <= MAX_CALL_CHARS && !out.iter().any(|c| c.call == call) {
                    out.push(GoalCall {
                        function: function.to_string(),
                        call: call.to_string(),
                    });
                }
                i = close + 1;
            }
            None => i = j + 1,
        }
    }
    out
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The index of the `)` closing the `(` at `open`, when everything between is literal
/// arguments: quoted strings, numbers, brackets, commas and the constants `True`, `False`,
/// `None`.
fn literal_arguments_end(chars: &[(usize, char)], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut k = open;
    let mut word = String::new();
    while k < chars.len() {
        let c = chars[k].1;
        if c.is_ascii_alphabetic() || c == '_' {
            word.push(c);
            k += 1;
            continue;
        }
        if !word.is_empty() {
            if !matches!(word.as_str(), "True" | "False" | "None") {
                return None;
            }
            word.clear();
        }
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return (c == ')').then_some(k);
                }
            }
            '\'' | '"' => {
                k += 1;
                while k < chars.len() && chars[k].1 != c {
                    if chars[k].1 == '\\' {
                        k += 1;
                    }
                    if chars.get(k).is_some_and(|(_, c)| *c == '\n') {
                        return None;
                    }
                    k += 1;
                }
                if k >= chars.len() {
                    return None;
                }
            }
            c if c.is_ascii_digit() || matches!(c, ' ' | ',' | '-' | '+' | '.' | ':') => {}
            _ => return None,
        }
        k += 1;
    }
    None
}

/// Does Python `source` define `function` at its top level (`def function(`, `async def`)?
pub(crate) fn defines_function(source: &str, function: &str) -> bool {
    source.lines().any(|line| {
        let rest = line
            .strip_prefix("async def ")
            .or_else(|| line.strip_prefix("def "));
        rest.and_then(|r| r.trim_start().strip_prefix(function))
            .is_some_and(|after| after.trim_start().starts_with('('))
    })
}

/// The module a Python file is imported as from the workspace root (`wordcount.py` ->
/// `wordcount`, `pkg/text.py` -> `pkg.text`); None when a part is not an identifier.
pub(crate) fn module_name(path: &str) -> Option<String> {
    let stem = path.strip_suffix(".py")?;
    let parts: Vec<&str> = stem.split('/').collect();
    let identifier = |p: &&str| {
        p.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && p.chars().all(|c| c.is_alphanumeric() || c == '_')
    };
    parts.iter().all(identifier).then(|| parts.join("."))
}

/// The shell command that prints `repr` of `call` evaluated with its function imported from
/// `module`, run from the workspace root: `python3 -c 'from wordcount import count_words;
/// print(repr(count_words('\''a  b'\'')))'`.
pub(crate) fn call_command(module: &str, call: &GoalCall) -> String {
    let script = format!(
        "from {module} import {}; print(repr({}))",
        call.function, call.call
    );
    format!("python3 -c {}", sh_single_quoted(&script))
}

fn sh_single_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]
    use super::*;

    #[test]
    fn calls_with_literal_arguments_are_found_as_written() {
        // (goal, the calls found)
        let cases: &[(&str, &[&str])] = &[
            (
                "count_words in wordcount.py gives wrong answers: count_words('a  b') returns 3 \
                 and count_words('') returns 1. Fix it.",
                &["count_words('a  b')", "count_words('')"],
            ),
            (
                "`apply_discount(100, 0.25)` must return 75.0, and apply_discount(100, 0.25) \
                 again.",
                &["apply_discount(100, 0.25)"],
            ),
            (
                "parse([1, 2], key=None) is not literal, but mean([1, 2, 3]) and f(\"a,b\") are.",
                &["mean([1, 2, 3])", "f(\"a,b\")"],
            ),
            (
                "flag(True, None) and neg(-1) and g() work.",
                &["flag(True, None)", "neg(-1)", "g()"],
            ),
            // Prose, names, calls on objects, variables as arguments, unclosed quotes.
            ("Write fizzbuzz.py (one file). Use os.path.join(a, b).", &[]),
            ("call obj.method('x') or f(x) or f('open", &[]),
        ];
        for (goal, want) in cases {
            let got: Vec<String> = goal_calls(goal).into_iter().map(|c| c.call).collect();
            assert_eq!(got, *want, "{goal}");
        }
        assert_eq!(
            goal_calls("f('a') ").first().map(|c| c.function.as_str()),
            Some("f")
        );
    }

    #[test]
    fn a_function_is_found_where_it_is_defined_at_the_top_level() {
        let source = "import re\n\ndef count_words(text):\n    return len(text.split())\n\n\
                      class C:\n    def method(self):\n        pass\nasync def fetch (url):\n";
        let cases = [
            ("count_words", true),
            ("count", false),
            ("method", false),
            ("fetch", true),
            ("re", false),
        ];
        for (function, want) in cases {
            assert_eq!(defines_function(source, function), want, "{function}");
        }
    }

    #[test]
    fn modules_are_named_as_python_imports_them() {
        let cases = [
            ("wordcount.py", Some("wordcount")),
            ("pkg/text_utils.py", Some("pkg.text_utils")),
            ("my-script.py", None),
            ("2fast.py", None),
            ("notes.txt", None),
        ];
        for (path, want) in cases {
            assert_eq!(module_name(path).as_deref(), want, "{path}");
        }
    }

    #[test]
    fn the_command_quotes_the_call_for_the_shell() {
        let call = GoalCall {
            function: "count_words".into(),
            call: "count_words('a  b')".into(),
        };
        assert_eq!(
            call_command("wordcount", &call),
            r"python3 -c 'from wordcount import count_words; print(repr(count_words('\''a  b'\'')))'"
        );
    }
}
