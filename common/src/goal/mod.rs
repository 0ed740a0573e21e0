//! The goal's own words: its clauses (`words`), what a clause says to run or check
//! (`clause_reading`), and the criteria derived from the clauses nothing else covers
//! (`criteria`, one per requirement of a sentence: `requirements`), and when a derived check
//! is set aside for a judged clause (`derived_checks`).

pub mod clause_reading;
pub mod criteria;
pub mod derived_checks;
pub mod requirements;
pub mod value_checks;
pub mod words;
