mod control_plane;
mod deploy;
mod faults;
mod openapi_conformance;
mod planning;
mod rubric;
mod structured_output;
mod telemetry;
