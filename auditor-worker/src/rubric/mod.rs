//! Scoring the contract's rubric with the judge model: the prompt (`prompt`), the model call
//! (`score`), the reply's defensive parse (`reply`) and the verdict turned into evidence
//! (`verdict`).

mod prompt;
mod reply;
pub(crate) mod score;
pub(crate) mod verdict;
