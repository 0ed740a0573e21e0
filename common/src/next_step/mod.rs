//! Parsing the manager's reply into the 6-way next step, defensively: a JSON object first
//! (fenced or bare), then LongHorizon-style control lines, else an error the manager is re-asked
//! with. [`next_step_schema`] is the JSON schema of that first, JSON layer, for servers that
//! constrain a reply to a schema (a model profile's `structured_output = "json_schema"`).

mod parse;
mod schema;
mod step;

pub use parse::parse_next_step;
pub use schema::{next_step_schema, NEXT_STEP_SCHEMA_NAME};
pub use step::{NextStep, NextStepError, ParseLayer, Route};

#[cfg(test)]
mod tests;
