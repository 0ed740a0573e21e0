//! The goal's own words: its clauses, and the exact names, paths, quoted strings and numbers a
//! step must not alter. Small models lose runs in the manager's paraphrase ("Create hello.py
//! with the content 'hello, loopgate'" for "prints exactly: hello, loopgate"; `print-hello.py`
//! for `hello.py`), so a step carries the goal's clauses verbatim and a step that alters an
//! exact word is sent back before any executor runs. Pure, bounded work.

/// Goals up to this many characters are served whole by every step.
const SHORT_GOAL_CHARS: usize = 800;
/// At most this many clauses ride in one step.
const MAX_CLAUSES: usize = 8;
/// Quoted strings shorter than this are not treated as exact words (`"a"`, `'x'`).
const MIN_EXACT_CHARS: usize = 3;

/// The goal split into its clauses (sentences, `;`-separated parts, lines), trimmed, in order.
/// A `.` inside a word (`hello.py`, `e.g.`) does not end a clause.
pub fn goal_clauses(goal: &str) -> Vec<String> {
    let chars: Vec<char> = goal.chars().collect();
    let mut clauses = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let next = chars.get(i + 1).copied();
        let ends = match c {
            '\n' | ';' => true,
            '.' | '!' | '?' => next.is_none_or(char::is_whitespace),
            _ => false,
        };
        if c != '\n' {
            current.push(c);
        }
        if ends {
            push_clause(&mut clauses, &mut current);
        }
    }
    push_clause(&mut clauses, &mut current);
    clauses
}

fn push_clause(clauses: &mut Vec<String>, current: &mut String) {
    let clause = current.trim().trim_end_matches(';').trim().to_string();
    if !clause.is_empty() {
        clauses.push(clause);
    }
    current.clear();
}

/// The clauses of `goal` a step with instruction `task` serves: all of them for a short goal
/// (the common case, and the one small models fail on), else those that share a name or two
/// words with the task, and the first clause always.
pub fn clauses_for_step(goal: &str, task: &str) -> Vec<String> {
    let clauses = goal_clauses(goal);
    if goal.chars().count() <= SHORT_GOAL_CHARS {
        return clauses.into_iter().take(MAX_CLAUSES).collect();
    }
    let task_names = exact_words(task).names;
    let task_words = plain_words(task);
    let mut picked: Vec<String> = Vec::new();
    for (i, clause) in clauses.iter().enumerate() {
        let names = exact_words(clause).names;
        let shared_names = names.iter().filter(|n| task_names.contains(n)).count();
        let shared_words = plain_words(clause)
            .iter()
            .filter(|w| task_words.contains(w))
            .count();
        if i == 0 || shared_names > 0 || shared_words >= 2 {
            picked.push(clause.clone());
        }
        if picked.len() == MAX_CLAUSES {
            break;
        }
    }
    picked
}

/// Lowercase words of four letters or more, for a rough overlap.
fn plain_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 4)
        .map(str::to_lowercase)
        .collect()
}

/// What in a text must be kept to the letter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExactWords {
    /// File names and paths (`hello.py`, `src/lib.rs`, `docs/`).
    pub names: Vec<String>,
    /// Quoted strings and what follows "exactly" (`hello, loopgate`).
    pub strings: Vec<String>,
    /// Numbers with the word they count (`3 lines` -> (3, "lines")).
    pub counts: Vec<(u64, String)>,
}

/// The exact words of `text`.
pub fn exact_words(text: &str) -> ExactWords {
    let mut words = ExactWords {
        names: Vec::new(),
        strings: quoted_strings(text),
        counts: Vec::new(),
    };
    if let Some(exact) = after_exactly(text) {
        if !words.strings.contains(&exact) {
            words.strings.push(exact);
        }
    }
    let tokens: Vec<&str> = text.split_whitespace().collect();
    for (i, raw) in tokens.iter().enumerate() {
        let token = raw.trim_matches(|c: char| "\"'`()[]{}<>,;:!?".contains(c));
        let token = token.trim_end_matches('.');
        if is_name(token) && !words.names.iter().any(|n| n == token) {
            words.names.push(token.to_string());
        }
        if let Ok(n) = token.parse::<u64>() {
            if let Some(next) = tokens.get(i + 1) {
                let unit: String = next
                    .chars()
                    .take_while(|c| c.is_alphabetic())
                    .flat_map(char::to_lowercase)
                    .collect();
                if unit.chars().count() >= 3 {
                    words.counts.push((n, unit));
                }
            }
        }
    }
    words
}

/// `hello.py`, `src/lib.rs`, `tests/`, `./run.sh`: a path-like token with an extension or a
/// directory separator, letters in it, no URL scheme.
fn is_name(token: &str) -> bool {
    if token.len() < 3 || token.contains("://") || !token.chars().any(char::is_alphabetic) {
        return false;
    }
    if !token
        .chars()
        .all(|c| c.is_alphanumeric() || "._-/".contains(c))
    {
        return false;
    }
    let has_dir = token.contains('/') && token.chars().filter(|&c| c == '/').count() < token.len();
    let has_ext = token.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
                && !stem.ends_with('.')
                // `e.g`, `i.e` are abbreviations, not files.
                && stem.chars().count() + ext.chars().count() > 2
                && (1..=6).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
    });
    has_dir || has_ext
}

/// Strings between matching quotes (`"..."`, `'...'`, `` `...` ``), where the opening quote
/// starts a word and the closing one ends it (an apostrophe in "don't" is not a quote).
fn quoted_strings(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let q = chars[i];
        let opens = matches!(q, '"' | '\'' | '`' | '“' | '‘')
            && (i == 0 || !chars[i - 1].is_alphanumeric());
        if !opens {
            i += 1;
            continue;
        }
        let close = match q {
            '“' => '”',
            '‘' => '’',
            other => other,
        };
        let end = (i + 1..chars.len())
            .find(|&j| chars[j] == close && chars.get(j + 1).is_none_or(|c| !c.is_alphanumeric()));
        match end {
            Some(j) => {
                let inner: String = chars[i + 1..j].iter().collect();
                if inner.trim().chars().count() >= MIN_EXACT_CHARS && !found.contains(&inner) {
                    found.push(inner);
                }
                i = j + 1;
            }
            None => i += 1,
        }
    }
    found
}

/// `prints exactly: hello, loopgate` -> `hello, loopgate` (to the end of the clause).
fn after_exactly(text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    let at = lower.find("exactly")?;
    let rest = text.get(at + "exactly".len()..)?;
    let rest = rest.trim_start_matches([':', ' ']);
    let end = rest.find(['\n', ';']).unwrap_or(rest.len());
    let value = rest[..end].trim().trim_end_matches('.').trim();
    let value = value.trim_matches(|c| "\"'`".contains(c));
    (value.chars().count() >= MIN_EXACT_CHARS).then(|| value.to_string())
}

/// One exact word of the goal the step changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alteration {
    /// The goal's word.
    pub goal: String,
    /// What the step wrote instead.
    pub step: String,
}

impl std::fmt::Display for Alteration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the goal says `{}`, the step says `{}`",
            self.goal, self.step
        )
    }
}

/// The goal's exact words that `task` alters: a name the task replaces with a similar but
/// different one (`print-hello.py`, `src/hello.py`, `workspace/hello.py` for `hello.py`), an
/// exact string it writes differently (case, punctuation, spacing), a count it changes.
/// `allowed` are other words the task may use as they are (the contract's checks mention test
/// files, for instance). A task that does not mention a word at all alters nothing.
pub fn altered_words(goal: &str, task: &str, allowed: &str) -> Vec<Alteration> {
    let goal_words = exact_words(goal);
    let task_words = exact_words(task);
    let allowed_words = exact_words(allowed);
    let mut out = Vec::new();
    for name in &task_words.names {
        if goal_words.names.contains(name)
            || allowed_words.names.contains(name)
            || is_test_file_name(name)
        {
            continue;
        }
        // A rename replaces the goal's name; a step that names both means two files.
        let renamed = goal_words
            .names
            .iter()
            .filter(|g| !task_words.names.contains(g))
            .find(|g| resembles(g, name));
        if let Some(goal_name) = renamed {
            out.push(Alteration {
                goal: goal_name.clone(),
                step: name.clone(),
            });
        }
    }
    for exact in &goal_words.strings {
        if task.contains(exact.as_str()) {
            continue;
        }
        let wanted = squash(exact);
        if wanted.chars().count() < MIN_EXACT_CHARS {
            continue;
        }
        let written = task_words
            .strings
            .iter()
            .find(|s| squash(s) == wanted)
            .cloned()
            .or_else(|| after_exactly(task).filter(|s| squash(s) == wanted));
        if let Some(step) = written {
            out.push(Alteration {
                goal: exact.clone(),
                step,
            });
        }
    }
    for (n, unit) in &goal_words.counts {
        if let Some((m, _)) = task_words.counts.iter().find(|(m, u)| u == unit && m != n) {
            out.push(Alteration {
                goal: format!("{n} {unit}"),
                step: format!("{m} {unit}"),
            });
        }
    }
    out
}

/// Lowercase letters and digits only.
fn squash(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// Does `candidate` look like a changed `name`: the same file in another directory, the same
/// extension with the name's stem inside it (or it inside the name's), or a close spelling?
fn resembles(name: &str, candidate: &str) -> bool {
    let base = |p: &str| {
        p.trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(p)
            .to_string()
    };
    let (name_base, cand_base) = (base(name), base(candidate));
    if name_base == cand_base {
        return true;
    }
    let split = |b: &str| match b.rsplit_once('.') {
        Some((stem, ext)) => (stem.to_lowercase(), ext.to_lowercase()),
        None => (b.to_lowercase(), String::new()),
    };
    let ((stem_a, ext_a), (stem_b, ext_b)) = (split(&name_base), split(&cand_base));
    if ext_a != ext_b || stem_a.chars().count() < 3 || stem_b.chars().count() < 3 {
        return false;
    }
    let shorter = stem_a.chars().count().min(stem_b.chars().count());
    let distance = edit_distance(&stem_a, &stem_b);
    stem_a.contains(&stem_b)
        || stem_b.contains(&stem_a)
        || (shorter >= 4 && distance <= 1)
        || (shorter >= 7 && distance <= 2)
}

/// `test_hello.py`, `hello_test.go`, `tests/hello.py`: tests are named after what they test.
fn is_test_file_name(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name).to_lowercase();
    let stem = base
        .rsplit_once('.')
        .map_or(base.as_str(), |(stem, _)| stem);
    name.starts_with("tests/")
        || name.contains("/tests/")
        || stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_spec")
}

/// Levenshtein distance, for short names.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clauses_split_on_sentences_not_on_file_names() {
        let cases: &[(&str, &[&str])] = &[
            (
                "Create hello.py that prints exactly: hello, loopgate",
                &["Create hello.py that prints exactly: hello, loopgate"],
            ),
            (
                "Write dedupe.py. It reads stdin; it keeps the order of first occurrence.",
                &[
                    "Write dedupe.py.",
                    "It reads stdin",
                    "it keeps the order of first occurrence.",
                ],
            ),
            ("First line\nsecond line", &["First line", "second line"]),
            ("  ", &[]),
        ];
        for (goal, want) in cases {
            assert_eq!(goal_clauses(goal), *want, "{goal}");
        }
    }

    #[test]
    fn exact_words_of_a_goal() {
        let w = exact_words("Create hello.py that prints exactly: hello, loopgate");
        assert_eq!(w.names, vec!["hello.py"]);
        assert_eq!(w.strings, vec!["hello, loopgate"]);
        let w = exact_words(
            "Print the 3 largest files under src/ to out.txt, quoted \"as is\"; don't recurse.",
        );
        assert_eq!(w.names, vec!["src/", "out.txt"]);
        assert_eq!(w.strings, vec!["as is"]);
        assert_eq!(w.counts, vec![(3, "largest".to_string())]);
        // URLs, versions and plain words are no names.
        let w = exact_words("See https://x.org/a.html, use 1.5 and e.g. a dot.");
        assert!(w.names.is_empty(), "{:?}", w.names);
    }

    #[test]
    fn alterations_are_found_and_faithful_steps_pass() {
        let goal = "Create hello.py that prints exactly: hello, loopgate";
        // (task, the goal word it alters, or None)
        let cases: &[(&str, Option<&str>)] = &[
            ("Create hello.py that prints exactly: hello, loopgate", None),
            ("Write hello.py with print('hello, loopgate')", None),
            ("Run the checks and fix what fails", None),
            (
                "Create print-hello.py printing hello, loopgate",
                Some("hello.py"),
            ),
            (
                "Create src/hello.py that prints hello, loopgate",
                Some("hello.py"),
            ),
            ("Create workspace/hello.py", Some("hello.py")),
            ("Create helo.py", Some("hello.py")),
            (
                "Make hello.py print exactly: Hello Loopgate",
                Some("hello, loopgate"),
            ),
            (
                "Make hello.py print \"hello loopgate\"",
                Some("hello, loopgate"),
            ),
        ];
        for (task, altered) in cases {
            let found = altered_words(goal, task, "");
            assert_eq!(
                found.first().map(|a| a.goal.as_str()),
                *altered,
                "{task}: {found:?}"
            );
        }
        // Names the checks use are allowed; tests are named after what they test; a step that
        // keeps the goal's name and adds another file renames nothing; another file type is a
        // different thing; a short name one letter off is not a typo of a longer one.
        let faithful = [
            ("Add check_hello.py", "pytest check_hello.py"),
            ("Add test_hello.py", ""),
            ("Write hello.py, then hello_cli.py that wraps hello.py", ""),
            ("Add hello.sh too", ""),
            ("Edit lib.rs", ""),
        ];
        for (task, allowed) in faithful {
            assert!(altered_words(goal, task, allowed).is_empty(), "{task}");
        }
        assert!(altered_words("Fix src/lib.rs", "Fix src/bin.rs", "").is_empty());
        assert_eq!(
            altered_words("Keep the 3 newest logs", "Keep the 2 newest logs", "")[0].step,
            "2 newest"
        );
    }

    #[test]
    fn steps_of_short_goals_carry_every_clause() {
        let goal = "Create hello.py that prints exactly: hello, loopgate";
        assert_eq!(clauses_for_step(goal, "anything"), vec![goal.to_string()]);
        let long = format!(
            "Build the parser in parse.rs. {} Then write docs.md describing the format.",
            "Filler sentence about nothing relevant here. ".repeat(30)
        );
        let picked = clauses_for_step(&long, "write docs.md for the format");
        assert_eq!(
            picked.first().map(String::as_str),
            Some("Build the parser in parse.rs.")
        );
        assert!(picked.iter().any(|c| c.contains("docs.md")), "{picked:?}");
        assert!(picked.len() < 5, "{picked:?}");
    }
}
