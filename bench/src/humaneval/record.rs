//! One HumanEval problem as the dataset (`HumanEval.jsonl`, one JSON object a line) holds it.

use serde_json::Value;

use super::error::HumanEvalError;

/// A problem: `prompt` is the signature and docstring (plus imports and helpers), `test` the
/// dataset's own `check(candidate)`, `canonical_solution` the reference body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanEvalRecord {
    /// `HumanEval/<number>`.
    pub task_id: String,
    pub number: u32,
    pub prompt: String,
    pub entry_point: String,
    pub canonical_solution: String,
    pub test: String,
}

impl HumanEvalRecord {
    /// The prompt with the reference body: what a correct `solution.py` can look like (the
    /// bench's own sanity checks use it; no role ever sees it).
    pub fn reference_source(&self) -> String {
        format!("{}{}", self.prompt, self.canonical_solution)
    }
}

/// Every problem of a JSONL text, in file order. Blank lines are skipped.
pub fn parse_jsonl(text: &str) -> Result<Vec<HumanEvalRecord>, HumanEvalError> {
    let mut records: Vec<HumanEvalRecord> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(raw).map_err(|e| HumanEvalError::BadLine {
            line,
            reason: e.to_string(),
        })?;
        let field = |name: &'static str| -> Result<String, HumanEvalError> {
            value[name]
                .as_str()
                .map(str::to_string)
                .ok_or(HumanEvalError::MissingField { line, field: name })
        };
        let task_id = field("task_id")?;
        let number = task_id
            .strip_prefix("HumanEval/")
            .and_then(|n| n.parse::<u32>().ok())
            .ok_or_else(|| HumanEvalError::BadTaskId {
                line,
                task_id: task_id.clone(),
            })?;
        if records.iter().any(|r| r.number == number) {
            return Err(HumanEvalError::DuplicateTask { number });
        }
        records.push(HumanEvalRecord {
            task_id,
            number,
            prompt: field("prompt")?,
            entry_point: field("entry_point")?,
            canonical_solution: field("canonical_solution")?,
            test: field("test")?,
        });
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const LINE: &str = r#"{"task_id": "HumanEval/7", "prompt": "def f(x):\n    \"\"\"Twice.\n    >>> f(2)\n    4\n    \"\"\"\n", "entry_point": "f", "canonical_solution": "    return 2 * x\n", "test": "def check(candidate):\n    assert candidate(3) == 6\n"}"#;

    #[test]
    fn parses_lines_and_reports_bad_ones() {
        let ok = parse_jsonl(&format!("{LINE}\n\n")).unwrap();
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0].number, 7);
        assert_eq!(ok[0].entry_point, "f");
        assert!(ok[0]
            .reference_source()
            .ends_with("\"\"\"\n    return 2 * x\n"));

        let cases: &[(&str, &str)] = &[
            ("not json", "HumanEval line 1:"),
            (
                r#"{"task_id": "HumanEval/1", "prompt": "p", "entry_point": "f", "test": "t"}"#,
                "field `canonical_solution` is missing",
            ),
            (
                r#"{"task_id": "Other/1", "prompt": "p", "entry_point": "f", "canonical_solution": "c", "test": "t"}"#,
                "is not `HumanEval/<number>`",
            ),
            (&format!("{LINE}\n{LINE}"), "task number 7 appears twice"),
        ];
        for (text, want) in cases {
            let err = parse_jsonl(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
