//! loopgate-workspace-walk: how a workspace directory is read into a snapshot, without any
//! I/O beyond the filesystem (no tokio, no NATS): the ignore patterns and their defaults
//! (`ignore`), the parallel directory walk (`tree_walk`), and the listing with its refusals and
//! symlink policy (`listing`). The freezer in `loopgate-snapshot` and the CLI's workspace upload
//! both use it, so a workspace `loopgate submit` accepts is one the freezer accepts. And how a
//! worker touches a tree an agent has had its hands on (`beneath`): every read, write, mkdir,
//! listing and chown resolved beneath the root without following a symlink; the executor's
//! tools, the freezer, the check runner and the browser share it.

mod beneath;
mod error;
mod ignore;
mod listing;
mod tree_walk;
mod write_output;

pub use beneath::{chown_tree, open_no_symlinks, BeneathError, RootDir};
pub use error::{Refusal, WalkError};
pub use ignore::{glob_match, is_ignored, DEFAULT_IGNORES};
pub use listing::{list_workspace, normalize_mode, ListedFile, Listing};
pub use tree_walk::{special_kind, walk, FileStat, Found};
pub use write_output::{write_output_file, OutputWriteError};
