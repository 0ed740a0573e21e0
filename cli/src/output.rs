//! Writing result lines to stdout without panicking when the reader goes away.

use std::fmt::Display;
use std::io::Write;

use crate::errors::CliError;

/// Writes one line to stdout (line-buffered, so `watch` output appears as it happens).
pub fn line(text: impl Display) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}").map_err(|e| {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            CliError::StdoutClosed
        } else {
            CliError::Stdout(e)
        }
    })
}

/// Writes every line of a multi-line block.
pub fn block(lines: &[String]) -> Result<(), CliError> {
    lines.iter().try_for_each(line)
}

/// A progress or hint line for people, on stderr (stdout stays parseable). Errors are ignored:
/// a closed stderr must not fail the command.
pub fn note(text: impl Display) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}
