mod control_plane;
mod deploy;
mod faults;
mod openapi_conformance;
mod planning;
mod rubric;
mod self_check;
mod telemetry;
