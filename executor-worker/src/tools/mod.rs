//! The tools of the built-in tool loop, confined to the episode's workspace: `shell`, the file
//! tools (`read_file`, `write_file`, `edit_file`, `list_dir`) and `finish`, dispatched by name
//! (`dispatch`), and in gui episodes the browser tools (`browser`).

pub(crate) mod browser;
pub(crate) mod dispatch;
pub(crate) mod edit_match;
pub(crate) mod python_literals;
pub(crate) mod same_name;
pub(crate) mod shell;
pub(crate) mod workspace;
