//! The goal's own words: its clauses (`words`), what a clause says to run or check
//! (`clause_reading`), and the criteria derived from the clauses nothing else covers
//! (`criteria`).

pub mod clause_reading;
pub mod criteria;
pub mod words;
