//! What the clause judge is shown besides the files: the commands a clause quotes
//! (`` `python3 fizzbuzz.py` ``) and the function calls the goal writes out
//! (`count_words('a  b')`), each run on the candidate in the checks' sandbox. A small judge
//! that reads code guesses what it prints or returns; it is far better at comparing a printed
//! result with the requirement. A command that writes a file the clause names
//! (`` `python3 to_json.py` `` writes people.json) shows that file too, so an empty output is
//! not read as "writes nothing". Never evidence: only checks and judgments are.
//!
//! `plan` says what to run (the audit runs it, as checks of a throwaway contract); `section`
//! renders what it printed into the clause's prompt.

mod plan;
mod section;

pub(crate) use plan::{command_runs, plan_clause_commands};
pub(crate) use section::{command_outputs, commands_section, CommandRun};

#[cfg(test)]
mod tests;
