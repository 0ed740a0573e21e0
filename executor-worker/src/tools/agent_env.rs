//! The whole environment of what the agent runs (a `shell` command, the browser): nothing of
//! the worker's own.

use std::path::Path;

use crate::config::ShellEnv;

/// The shell's whole environment: PATH, HOME (the workspace for `shell`, the profile for the
/// browser) and LANG.
pub(crate) fn shell_env(home: &Path, env: &ShellEnv) -> Vec<(String, String)> {
    vec![
        ("PATH".to_string(), env.path.clone()),
        ("HOME".to_string(), home.display().to_string()),
        ("LANG".to_string(), env.lang.clone()),
    ]
}
