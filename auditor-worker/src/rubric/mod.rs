//! Scoring the contract's rubric with the judge model: the prompt (`prompt`), the model call
//! and its defensive parse (`judge`), and the verdict turned into evidence (`verdict`).

pub(crate) mod judge;
pub(crate) mod prompt;
pub(crate) mod reply;
pub(crate) mod verdict;
