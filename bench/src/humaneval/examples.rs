//! The examples a problem's docstring gives: doctest lines (`>>> f(1)` then the result), or,
//! in about half of HumanEval, examples in prose such as `f(1) ==> 2`, `f(1) ➞ 2`,
//! `f(1) should return 2`. The prose ones are turned into a doctest file of `call == expected`
//! lines, so that those problems get an example check too.

use super::doctests::doctest_count;

/// `call == expected`, both Python expressions as the docstring wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedExample {
    pub call: String,
    pub expected: String,
}

/// What separates a call from its result in prose examples, longest first (so `==>` is not read
/// as `==`).
const SEPARATORS: &[&str] = &[
    "should return",
    "returns",
    "==>",
    "==",
    "=>",
    "->",
    "\u{279e}",
    "=",
];

/// The prose examples of `entry_point` in `prompt` (one a line; examples spread over several
/// lines are skipped). Only for prompts without doctests: those are run as they are.
pub fn listed_examples(prompt: &str, entry_point: &str) -> Vec<ListedExample> {
    if doctest_count(prompt) > 0 || entry_point.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for line in prompt.lines() {
        if line.trim_start().starts_with("def ") {
            continue;
        }
        if let Some(example) = example_on_line(line, entry_point) {
            if !out.contains(&example) {
                out.push(example);
            }
        }
    }
    out
}

fn example_on_line(line: &str, entry_point: &str) -> Option<ListedExample> {
    let start = find_call(line, entry_point)?;
    let args_open = start + entry_point.len();
    let close = matching_paren(line, args_open)?;
    let call = line[start..=close].to_string();
    let mut rest = line[close + 1..].trim_start();
    if let Some(after_hash) = rest.strip_prefix('#') {
        rest = after_hash.trim_start();
    }
    let sep = SEPARATORS.iter().find(|s| rest.starts_with(**s))?;
    let mut expected = rest[sep.len()..].trim();
    // A trailing comment, then a sentence's full stop.
    if let Some(hash) = expected.find(" #") {
        expected = expected[..hash].trim_end();
    }
    let expected = expected.strip_suffix('.').unwrap_or(expected).trim();
    // A worked result, `19 - 5 - 6 = 8`: the value after the last ` = `.
    let expected = expected.rsplit(" = ").next().unwrap_or(expected).trim();
    if expected.is_empty() {
        return None;
    }
    Some(ListedExample {
        call,
        expected: python_literals(expected),
    })
}

/// Byte offset of `name(` on the line, as a whole name (not the tail of a longer one).
fn find_call(line: &str, name: &str) -> Option<usize> {
    let needle = format!("{name}(");
    let mut from = 0;
    while let Some(found) = line[from..].find(&needle) {
        let at = from + found;
        let before = line[..at].chars().next_back();
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
            return Some(at);
        }
        from = at + needle.len();
    }
    None
}

/// The offset of the `)` closing the `(` at `open`, skipping brackets inside string literals.
fn matching_paren(line: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (offset, c) in line[open..].char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return (c == ')').then_some(open + offset);
                }
            }
            _ => {}
        }
    }
    None
}

/// `true` / `false` written in lower case (a few docstrings do) as Python's `True` / `False`.
fn python_literals(expected: &str) -> String {
    match expected {
        "true" => "True".into(),
        "false" => "False".into(),
        other => other.to_string(),
    }
}

/// The prose examples as doctest text: `>>> (call) == (expected)` answered by `True`.
pub fn listed_as_doctests(examples: &[ListedExample]) -> Vec<String> {
    examples
        .iter()
        .map(|e| format!(">>> ({}) == ({})\nTrue", e.call, e.expected))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn ex(call: &str, expected: &str) -> ListedExample {
        ListedExample {
            call: call.into(),
            expected: expected.into(),
        }
    }

    #[test]
    fn prose_examples_in_the_formats_humaneval_uses() {
        let cases: &[(&str, &str, Option<ListedExample>)] = &[
            (
                "digitSum(\"abAB\") => 131",
                "digitSum",
                Some(ex("digitSum(\"abAB\")", "131")),
            ),
            (
                "    search([4, 1, 2, 2, 3, 1]) == 2",
                "search",
                Some(ex("search([4, 1, 2, 2, 3, 1])", "2")),
            ),
            (
                "will_it_fly([3, 2, 3], 9) \u{279e} True",
                "will_it_fly",
                Some(ex("will_it_fly([3, 2, 3], 9)", "True")),
            ),
            (
                "iscube(-1) ==> True",
                "iscube",
                Some(ex("iscube(-1)", "True")),
            ),
            (
                "move_one_ball([3, 4, 5, 1, 2])==>True",
                "move_one_ball",
                Some(ex("move_one_ball([3, 4, 5, 1, 2])", "True")),
            ),
            (
                "decimal_to_binary(15)   # returns \"db1111db\"",
                "decimal_to_binary",
                Some(ex("decimal_to_binary(15)", "\"db1111db\"")),
            ),
            (
                "file_name_check(\"example.txt\") # => 'Yes'",
                "file_name_check",
                Some(ex("file_name_check(\"example.txt\")", "'Yes'")),
            ),
            (
                "multiply(148, 412) should return 16.",
                "multiply",
                Some(ex("multiply(148, 412)", "16")),
            ),
            (
                "anti_shuffle('Hi') returns 'Hi'",
                "anti_shuffle",
                Some(ex("anti_shuffle('Hi')", "'Hi'")),
            ),
            (
                "get_odd_collatz(5) returns [1, 5] # The collatz sequence",
                "get_odd_collatz",
                Some(ex("get_odd_collatz(5)", "[1, 5]")),
            ),
            (
                "choose_num(12, 15) = 14",
                "choose_num",
                Some(ex("choose_num(12, 15)", "14")),
            ),
            (
                "* eat(5, 6, 10) -> [11, 4]",
                "eat",
                Some(ex("eat(5, 6, 10)", "[11, 4]")),
            ),
            (
                "fruit_distribution(\"5 apples\", 19) ->19 - 5 - 6 = 8",
                "fruit_distribution",
                Some(ex("fruit_distribution(\"5 apples\", 19)", "8")),
            ),
            (
                "for x_or_y(7, 34, 12) == 34",
                "x_or_y",
                Some(ex("x_or_y(7, 34, 12)", "34")),
            ),
            (
                "is_simple_power(2, 2) => true",
                "is_simple_power",
                Some(ex("is_simple_power(2, 2)", "True")),
            ),
            // Brackets inside strings do not end the call.
            (
                "match_parens(['()(', ')']) == 'Yes'",
                "match_parens",
                Some(ex("match_parens(['()(', ')'])", "'Yes'")),
            ),
            // Not examples: a sentence, a call spread over lines, no result, another name.
            (
                "Write a function next_smallest() that returns the 2nd",
                "next_smallest",
                None,
            ),
            ("get_row([", "get_row", None),
            (
                "check_dict_case({\"a\":\"apple\"}) should return",
                "check_dict_case",
                None,
            ),
            ("my_search([1]) == 2", "search", None),
            ("obj.search([1]) == 2", "search", None),
        ];
        for (line, entry, want) in cases {
            assert_eq!(&example_on_line(line, entry), want, "{line}");
        }
    }

    #[test]
    fn doctests_are_counted_and_win_over_prose() {
        let doctested = "def f(x):\n    \"\"\"\n    >>> f(1)\n    2\n    >>> f(2)\n    3\n    f(3) == 4\n    \"\"\"\n";
        let prose =
            "def f(x):\n    \"\"\"\n    f(3) == 4\n    f(3) == 4\n    f(5) ==> 6\n    \"\"\"\n";
        let bare = "def f(x):\n    \"\"\"Adds one.\"\"\"\n";
        let cases: &[(&str, usize, Vec<ListedExample>)] = &[
            (doctested, 2, vec![]),
            (prose, 0, vec![ex("f(3)", "4"), ex("f(5)", "6")]),
            (bare, 0, vec![]),
        ];
        for (prompt, doctests, listed) in cases {
            assert_eq!(doctest_count(prompt), *doctests, "{prompt}");
            assert_eq!(&listed_examples(prompt, "f"), listed, "{prompt}");
        }
    }

    #[test]
    fn listed_examples_become_comparisons() {
        assert_eq!(
            listed_as_doctests(&[ex("f(3)", "4"), ex("f('a')", "'b'")]),
            vec![
                ">>> (f(3)) == (4)\nTrue".to_string(),
                ">>> (f('a')) == ('b')\nTrue".into()
            ]
        );
    }
}
