//! What the checks' shell makes of a derived check's text, asked without running the check and
//! without the candidate (see `loopgate_common::goal::derived_checks`): `sh -n -c CHECK` parses
//! it and executes nothing (no command, no substitution); `sh -c 'command -v "$1"' sh NAME`
//! looks up the bare command it starts with on the checks' `PATH` (its absolute directories
//! only, so no directory relative to where a check runs counts). Both run in `/` with an empty
//! environment but that `PATH`, and are bounded in time; an answer that cannot be had leaves the
//! check deciding.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use loopgate_common::goal::derived_checks::{
    derived_checks, first_command_name, set_aside_checks, CheckText, SetAside,
};
use loopgate_protocol::contract::Criterion;

/// The shell the checks run under (`sh -c <check>`).
const SHELL: &str = "sh";
/// One parse or lookup gets this long.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes of the shell's message kept.
const MAX_MESSAGE: usize = 400;

/// The derived checks of `criteria` to set aside on this auditor, asking its shell about each
/// one's text once; `check_path`: the checks' `PATH`.
pub(crate) async fn set_aside<'a>(
    criteria: &'a [Criterion],
    check_path: &str,
) -> Vec<SetAside<'a>> {
    let mut answers: HashMap<&str, CheckText> = HashMap::new();
    for (_, check, _) in derived_checks(criteria) {
        if !answers.contains_key(check) {
            answers.insert(check, check_text(check, check_path).await);
        }
    }
    for (check, answer) in &answers {
        if let CheckText::Unknown(why) = answer {
            tracing::warn!(check = %check, why = %why, "could not ask the shell about a derived check; it decides as written");
        }
    }
    set_aside_checks(criteria, |check| {
        answers.get(check).cloned().unwrap_or(CheckText::Sound)
    })
}

/// What the shell makes of `check`: its parse, then the lookup of its first command.
pub(crate) async fn check_text(check: &str, check_path: &str) -> CheckText {
    let path = absolute_dirs(check_path);
    match ask_again_once(&["-n", "-c", check], &path).await {
        Ok((true, _)) => {}
        Ok((false, message)) => return CheckText::DoesNotParse(message),
        Err(err) => return CheckText::Unknown(err.to_string()),
    }
    let Some(name) = first_command_name(check) else {
        return CheckText::Sound;
    };
    match ask_again_once(&["-c", "command -v \"$1\" >/dev/null", "sh", name], &path).await {
        Ok((true, _)) => CheckText::Sound,
        Ok((false, _)) => CheckText::MissingCommand(name.to_string()),
        Err(err) => CheckText::Unknown(err.to_string()),
    }
}

/// The absolute directories of a `PATH` value, in order.
fn absolute_dirs(path: &str) -> String {
    path.split(':')
        .filter(|dir| dir.starts_with('/'))
        .collect::<Vec<_>>()
        .join(":")
}

/// Why the shell could not be asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AskError {
    #[error("`{SHELL}` did not start: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("`{SHELL}` did not answer within {0:?}")]
    Timeout(Duration),
    #[error("`{SHELL}` failed: {0}")]
    Wait(#[source] std::io::Error),
}

impl AskError {
    /// A timeout may pass on a less busy host; a shell that does not start will not.
    pub(crate) fn is_retryable(&self) -> bool {
        matches!(self, AskError::Timeout(_) | AskError::Wait(_))
    }
}

/// [`ask`], once more after an error that may pass.
async fn ask_again_once(args: &[&str], path: &str) -> Result<(bool, String), AskError> {
    match ask(args, path).await {
        Err(err) if err.is_retryable() => ask(args, path).await,
        answer => answer,
    }
}

/// Run the shell with `args`; whether it exited 0, and what it printed on stderr.
async fn ask(args: &[&str], path: &str) -> Result<(bool, String), AskError> {
    let child = tokio::process::Command::new(SHELL)
        .args(args)
        .env_clear()
        .env("PATH", path)
        .env("LC_ALL", "C")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(AskError::Spawn)?;
    let out = tokio::time::timeout(ASK_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| AskError::Timeout(ASK_TIMEOUT))?
        .map_err(AskError::Wait)?;
    let mut message = String::from_utf8_lossy(&out.stderr).into_owned();
    if let Some((cut, _)) = message.char_indices().nth(MAX_MESSAGE) {
        message.truncate(cut);
    }
    Ok((out.status.success(), message))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_protocol::contract::CriterionSource;

    const PATH: &str = "relative/bin:/usr/local/bin:/usr/bin:/bin";

    #[tokio::test]
    async fn the_shell_parses_and_looks_up_without_running_anything() {
        let marker = tempfile::tempdir().unwrap();
        let touched = marker.path().join("ran");
        let cases = vec![
            ("python3 -c 'print(1)' | grep -q 1".to_string(), "sound"),
            ("test \"$(echo a)\" = 'b\"".to_string(), "parse"),
            ("if true; then echo".to_string(), "parse"),
            ("no-such-command-loopgate --version".to_string(), "missing"),
            ("./run.sh".to_string(), "sound"),
            // A parse runs nothing, not even a command substitution.
            (
                format!("echo $(touch {}) && exit 1", touched.display()),
                "sound",
            ),
        ];
        for (check, want) in cases {
            let got = match check_text(&check, PATH).await {
                CheckText::Sound => "sound",
                CheckText::DoesNotParse(_) => "parse",
                CheckText::MissingCommand(_) => "missing",
                CheckText::Unknown(why) => panic!("{check}: {why}"),
            };
            assert_eq!(got, want, "{check}");
        }
        assert!(!touched.exists(), "the parse ran the check");
        let err = AskError::Timeout(ASK_TIMEOUT);
        assert!(err.is_retryable() && err.to_string().contains("did not answer"));
        assert_eq!(absolute_dirs(PATH), "/usr/local/bin:/usr/bin:/bin");
    }

    #[tokio::test]
    async fn a_broken_derived_check_is_set_aside_and_an_authors_is_not() {
        let criterion = |id: &str, source, check: &str| Criterion {
            id: id.into(),
            description: String::new(),
            check: Some(check.into()),
            blocking: true,
            timeout_secs: 5,
            source,
            clause: Some("keep the order".into()),
        };
        let criteria = vec![
            criterion("order", CriterionSource::Goal, "test \"$(echo a)\" = 'b\""),
            criterion("own", CriterionSource::Task, "test \"$(echo a)\" = 'b\""),
            criterion("fine", CriterionSource::Goal, "test 1 = 2"),
        ];
        let aside = set_aside(&criteria, PATH).await;
        assert_eq!(aside.len(), 1, "{aside:?}");
        assert_eq!(aside[0].criterion.id, "order");
        assert!(aside[0].why.contains("cannot parse"), "{}", aside[0].why);
    }
}
