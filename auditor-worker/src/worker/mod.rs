//! The auditor as a worker: start-up (connect, open the buckets, probe the check sandbox,
//! build the judge clients) and the consume loop on the shared runtime, each delivery handled
//! as decode -> audit -> publish the report -> settle (`delivery`).

pub(crate) mod delivery;
pub(crate) mod startup;
