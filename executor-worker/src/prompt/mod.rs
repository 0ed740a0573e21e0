//! The executor's prompt: the system prompt of the built-in tool loop (`system`), the first
//! user message of an episode (`task`), the file previews in it (`previews`) and the hints for
//! paths a failing check names (`path_hints`). The prose is in `.md` templates beside the code
//! (`template`).

pub(crate) mod path_hints;
pub(crate) mod previews;
pub(crate) mod system;
pub(crate) mod task;
pub(crate) mod template;

#[cfg(test)]
mod tests;
