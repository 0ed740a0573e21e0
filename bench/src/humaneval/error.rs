//! What can go wrong reading the HumanEval data or turning a problem into a task.

/// Errors of the HumanEval pieces (dataset, subset, task generation).
#[derive(Debug, thiserror::Error)]
pub enum HumanEvalError {
    #[error("HumanEval line {line}: {reason}")]
    BadLine { line: usize, reason: String },
    #[error("HumanEval line {line}: field `{field}` is missing or not a string")]
    MissingField { line: usize, field: &'static str },
    #[error("HumanEval line {line}: task_id `{task_id}` is not `HumanEval/<number>`")]
    BadTaskId { line: usize, task_id: String },
    #[error("HumanEval: task number {number} appears twice")]
    DuplicateTask { number: u32 },
    #[error("asked for {asked} problems, the dataset has {have}")]
    SubsetTooLarge { asked: usize, have: usize },
    #[error("asked for an empty subset")]
    EmptySubset,
    #[error("task for {task_id} is invalid: {reason}")]
    InvalidTask { task_id: String, reason: String },
    #[error("task TOML: {0}")]
    Toml(String),
}
