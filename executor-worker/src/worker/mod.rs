//! The executor as a worker: start-up (connect, topology, context) and one loop per capability
//! on the shared runtime, each delivery handled as decode -> run the episode -> publish ->
//! settle (`delivery`).

pub(crate) mod delivery;
pub(crate) mod startup;
pub(crate) mod work_dir_space;
