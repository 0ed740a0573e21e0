//! The hidden criteria of a long task: `hidden/check.sh`, run by the bench (never by a role)
//! by its path in a scratch copy of the snapshot being judged, prints `PASS <id>` or
//! `FAIL <id>` per criterion (examples/long/README.md). A criterion the script does not
//! report as passing (a crash, a timeout, a missing line) counts as failing.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use crate::scratch_check::{run_in_scratch_copy, ScratchCommand};

/// Seconds a task's hidden script may take unless `--hidden-secs` says otherwise (the web
/// task's takes about 40 s on a passing page, the others 5-15 s).
pub const DEFAULT_HIDDEN_SECS: u64 = 300;

/// At most this many failure reasons (the script's stderr lines) are kept.
const MAX_REASONS: usize = 20;
/// Each kept reason is cut to this many characters.
const REASON_CHARS: usize = 300;

/// The hidden criteria of one snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HiddenOutcome {
    /// The criteria that passed, in the task's order.
    pub passed: Vec<String>,
    /// The criteria that did not pass (a `FAIL` line, or no line at all), in the task's order.
    pub failed: Vec<String>,
    /// Ids the script reported that the task does not have.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unexpected: Vec<String>,
    /// The whole script ran out of time (the criteria it had not reported count as failing).
    #[serde(default)]
    pub timed_out: bool,
    /// The reasons it gave for failures (stderr, `LONG_HIDDEN_VERBOSE=1`), bounded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

impl HiddenOutcome {
    pub fn passed_count(&self) -> u32 {
        u32::try_from(self.passed.len()).unwrap_or(u32::MAX)
    }

    pub fn total(&self) -> u32 {
        u32::try_from(self.passed.len() + self.failed.len()).unwrap_or(u32::MAX)
    }
}

/// Read the script's stdout against the task's criterion ids: an id passes only on a
/// `PASS <id>` line (a later `FAIL` line for the same id wins over it).
pub fn parse_hidden_output(stdout: &str, ids: &[String]) -> HiddenOutcome {
    let mut verdicts: BTreeMap<&str, bool> = BTreeMap::new();
    let mut unexpected = Vec::new();
    for line in stdout.lines() {
        let Some((word, id)) = line.trim().split_once(' ') else {
            continue;
        };
        let id = id.trim();
        let pass = match word {
            "PASS" => true,
            "FAIL" => false,
            _ => continue,
        };
        match ids.iter().find(|known| known.as_str() == id) {
            Some(known) => {
                let slot = verdicts.entry(known.as_str()).or_insert(pass);
                *slot = *slot && pass;
            }
            None if !unexpected.iter().any(|u: &String| u == id) => unexpected.push(id.to_string()),
            None => {}
        }
    }
    let (passed, failed): (Vec<String>, Vec<String>) = ids
        .iter()
        .cloned()
        .partition(|id| verdicts.get(id.as_str()) == Some(&true));
    HiddenOutcome {
        passed,
        failed,
        unexpected,
        timed_out: false,
        reasons: Vec::new(),
    }
}

/// The failure reasons the script printed on stderr: non-blank lines, bounded.
pub fn failure_reasons(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(MAX_REASONS)
        .map(|l| l.chars().take(REASON_CHARS).collect())
        .collect()
}

/// The time limit of each task's hidden script: one for all (`300`), with exceptions by task
/// (`300,web-shopping=600`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HiddenTimeouts {
    pub default: Duration,
    pub by_task: BTreeMap<String, Duration>,
}

impl Default for HiddenTimeouts {
    fn default() -> Self {
        HiddenTimeouts {
            default: Duration::from_secs(DEFAULT_HIDDEN_SECS),
            by_task: BTreeMap::new(),
        }
    }
}

impl HiddenTimeouts {
    /// `SECS`, `TASK=SECS` or a comma-separated mix of them (the last plain `SECS` is the
    /// default for every other task).
    pub fn parse(spec: &str) -> anyhow::Result<HiddenTimeouts> {
        let mut out = HiddenTimeouts::default();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (task, secs) = match part.split_once('=') {
                Some((task, secs)) => (Some(task.trim()), secs.trim()),
                None => (None, part),
            };
            let secs: u64 = secs
                .parse()
                .with_context(|| format!("hidden check seconds: not a number: {part}"))?;
            if secs == 0 {
                bail!("hidden check seconds must be at least 1: {part}");
            }
            match task {
                Some("") => bail!("hidden check seconds: no task name in {part}"),
                Some(task) => {
                    out.by_task
                        .insert(task.to_string(), Duration::from_secs(secs));
                }
                None => out.default = Duration::from_secs(secs),
            }
        }
        Ok(out)
    }

    pub fn for_task(&self, task: &str) -> Duration {
        self.by_task.get(task).copied().unwrap_or(self.default)
    }
}

/// Run `script` (a task's `hidden/check.sh`) by its path in a scratch copy of `tree`, with
/// `env` (PATH with `loopgate`, the `[gui]` variables) and failure reasons on, and read its
/// verdicts against `ids`.
pub async fn run_hidden_check(
    script: &Path,
    tree: &Path,
    ids: &[String],
    env: &[(String, String)],
    timeout: Duration,
) -> anyhow::Result<HiddenOutcome> {
    let mut env = env.to_vec();
    env.push(("LONG_HIDDEN_VERBOSE".to_string(), "1".to_string()));
    let run = run_in_scratch_copy(tree, &ScratchCommand::script(script, &env, timeout))
        .await
        .with_context(|| format!("running {}", script.display()))?;
    let mut outcome = parse_hidden_output(&run.stdout, ids);
    outcome.timed_out = run.timed_out;
    outcome.reasons = failure_reasons(&run.stderr);
    if run.timed_out {
        outcome.reasons.push(format!(
            "the hidden script ran past {} s and was stopped",
            timeout.as_secs()
        ));
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn hidden_output_is_read_against_the_task_ids() {
        let task = ids(&["load", "count", "total"]);
        /// (stdout, passed, failed, unexpected)
        type Case<'a> = (&'a str, &'a [&'a str], &'a [&'a str], &'a [&'a str]);
        let cases: [Case; 7] = [
            (
                "PASS load\nPASS count\nPASS total\n",
                &["load", "count", "total"],
                &[],
                &[],
            ),
            (
                "PASS load\nFAIL count\nPASS total\n",
                &["load", "total"],
                &["count"],
                &[],
            ),
            // A line missing (the script crashed midway) is a failure.
            ("PASS load\n", &["load"], &["count", "total"], &[]),
            ("", &[], &["load", "count", "total"], &[]),
            // Noise, odd spacing, an unknown id.
            (
                "Traceback...\n  PASS count  \nPASS extra\npassing load\n",
                &["count"],
                &["load", "total"],
                &["extra"],
            ),
            // A FAIL for an id wins over its PASS.
            (
                "PASS load\nFAIL load\n",
                &[],
                &["load", "count", "total"],
                &[],
            ),
            // Ids are whole words.
            (
                "PASS loa\nPASS load2\n",
                &[],
                &["load", "count", "total"],
                &["loa", "load2"],
            ),
        ];
        for (stdout, passed, failed, unexpected) in cases {
            let got = parse_hidden_output(stdout, &task);
            assert_eq!(got.passed, ids(passed), "{stdout:?}");
            assert_eq!(got.failed, ids(failed), "{stdout:?}");
            assert_eq!(got.unexpected, ids(unexpected), "{stdout:?}");
            assert_eq!(got.total(), 3);
            assert_eq!(got.passed_count() as usize, passed.len());
        }
    }

    #[test]
    fn reasons_are_bounded() {
        let long = "x".repeat(1000);
        let stderr = format!("    load: boom\n\n{long}\n");
        let reasons = failure_reasons(&stderr);
        assert_eq!(reasons[0], "load: boom");
        assert_eq!(reasons[1].chars().count(), REASON_CHARS);
        let many = "r\n".repeat(100);
        assert_eq!(failure_reasons(&many).len(), MAX_REASONS);
    }

    #[test]
    fn hidden_timeouts_parse() {
        let t = HiddenTimeouts::parse("120, web-shopping=600").unwrap();
        assert_eq!(t.for_task("ledger-cli"), Duration::from_secs(120));
        assert_eq!(t.for_task("web-shopping"), Duration::from_secs(600));
        let only_task = HiddenTimeouts::parse("web-shopping=900").unwrap();
        assert_eq!(
            only_task.for_task("x"),
            Duration::from_secs(DEFAULT_HIDDEN_SECS)
        );
        for bad in ["x", "0", "=5", "a=b", "a=0"] {
            assert!(HiddenTimeouts::parse(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_script_run_by_its_path_finds_files_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let hidden = dir.path().join("task/hidden");
        std::fs::create_dir_all(&hidden).unwrap();
        std::fs::write(dir.path().join("task/lib.sh"), "word=PASS\n").unwrap();
        std::fs::write(
            hidden.join("check.sh"),
            ". \"$(dirname \"$0\")/../lib.sh\"\necho \"$word a\"\n\
             if [ -f answer.txt ]; then echo PASS b; else echo FAIL b; echo '    b: no answer.txt' >&2; fi\n",
        )
        .unwrap();
        let tree = tempfile::tempdir().unwrap();
        let got = run_hidden_check(
            &hidden.join("check.sh"),
            tree.path(),
            &ids(&["a", "b"]),
            &[],
            Duration::from_secs(20),
        )
        .await
        .unwrap();
        assert_eq!(got.passed, ids(&["a"]));
        assert_eq!(got.failed, ids(&["b"]));
        assert_eq!(got.reasons, ["b: no answer.txt"]);
    }
}
