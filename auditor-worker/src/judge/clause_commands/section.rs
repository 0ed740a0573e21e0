//! The clause prompt's sections on what the clause's commands printed and what the goal's calls
//! returned on the candidate.

use std::fmt::Write as _;

use crate::prompt_text::tail_chars;

/// Characters of a clause command's output shown with its clause.
const COMMAND_OUTPUT_CHARS: usize = 600;

/// What one command printed on the candidate, for the judge to read.
#[derive(Debug, Clone)]
pub(crate) struct CommandRun {
    pub(crate) command: String,
    /// The goal's call this command evaluates (`count_words('a  b')`), shown instead of it.
    pub(crate) call: Option<String>,
    /// The criteria whose judge is shown it.
    pub(crate) for_clauses: Vec<String>,
    pub(crate) exit_code: Option<i32>,
    pub(crate) output: String,
}

/// What criterion `id`'s commands printed, as its prompt shows it (each cut to its last
/// characters), without the prompt's words around it.
pub(crate) fn command_outputs<'a>(
    id: &'a str,
    commands: &'a [CommandRun],
) -> impl Iterator<Item = &'a str> + 'a {
    commands
        .iter()
        .filter(move |r| r.for_clauses.iter().any(|c| c == id))
        .map(|r| tail_chars(r.output.trim(), COMMAND_OUTPUT_CHARS))
}

/// The prompt's sections for criterion `id`: what the requirement's commands printed, and what
/// the goal's calls returned. Empty when there is nothing for it.
pub(crate) fn commands_section(id: &str, commands: &[CommandRun]) -> String {
    let mut p = String::new();
    let mine = |call: bool| {
        commands
            .iter()
            .filter(move |r| r.call.is_some() == call && r.for_clauses.iter().any(|c| c == id))
    };
    let exit_of = |r: &CommandRun| {
        r.exit_code
            .map_or("did not finish".to_string(), |c| format!("exit {c}"))
    };
    for (i, r) in mine(false).enumerate() {
        if i == 0 {
            let _ = writeln!(p, "\n## The requirement's commands, run on this snapshot");
        }
        let out = tail_chars(r.output.trim_end(), COMMAND_OUTPUT_CHARS);
        let _ = writeln!(
            p,
            "`{}` ({}) printed:\n```\n{out}\n```",
            r.command,
            exit_of(r)
        );
    }
    for (i, r) in mine(true).enumerate() {
        if i == 0 {
            let _ = writeln!(
                p,
                "\n## What the goal's calls return on this snapshot (evaluated with Python)"
            );
        }
        let call = r.call.as_deref().unwrap_or_default();
        let out = tail_chars(r.output.trim(), COMMAND_OUTPUT_CHARS);
        if r.exit_code == Some(0) && !out.contains('\n') {
            let _ = writeln!(p, "- `{call}` returns `{out}`");
        } else {
            let _ = writeln!(p, "- `{call}` ({}):\n```\n{out}\n```", exit_of(r));
        }
    }
    p
}
