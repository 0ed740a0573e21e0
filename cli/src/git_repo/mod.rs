//! The user's git repository, through libgit2 (`git2`): reading a commit's tree as the
//! starting workspace (`start_tree`, choosing entries in `tree_select`) and writing a verified
//! result as one commit on a new branch or as a `git format-patch` file (`result_commit`, with
//! `.gitattributes` line ends in `eol`; the message comes from
//! `loopgate_common::apply_message`). The working tree, the index and HEAD are never written.

mod eol;
mod error;
#[cfg(test)]
mod repo_tests;
mod result_commit;
mod start_tree;
mod tree_select;

pub use error::{RepoError, RepoErrorKind};
pub use result_commit::{write_result, FinalFile, ResultTarget, Written};
pub use start_tree::{open_repository, read_start, StartTree};
pub use tree_select::SelectedFile;
