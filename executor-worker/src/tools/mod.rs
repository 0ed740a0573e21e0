//! The tools of the built-in tool loop, confined to the episode's workspace. One file per tool
//! (`write_file`, `read_file`, `edit_file`, `list_dir`, `shell`, `finish`, and in gui episodes
//! the browser tools under `browser/`), all behind one `enum Tool` (`tool`); an episode's tool
//! set and the dispatch of a call (`dispatch`).

pub(crate) mod agent_env;
pub(crate) mod browser;
pub(crate) mod context;
pub(crate) mod desktop;
pub(crate) mod dispatch;
pub(crate) mod edit_file;
pub(crate) mod edit_match;
pub(crate) mod fenced_content;
pub(crate) mod finish;
pub(crate) mod html_fragment;
pub(crate) mod kept_definitions;
pub(crate) mod list_dir;
pub(crate) mod mended_python;
pub(crate) mod python_literals;
pub(crate) mod python_missing_import;
pub(crate) mod python_redefined;
pub(crate) mod python_self_import;
pub(crate) mod python_syntax;
pub(crate) mod read_file;
pub(crate) mod same_name;
pub(crate) mod shell;
pub(crate) mod tool;
pub(crate) mod tool_def;
pub(crate) mod workspace;
pub(crate) mod write_file;
