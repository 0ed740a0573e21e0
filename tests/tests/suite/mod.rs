mod control_plane;
mod deploy;
mod effective_loop;
mod faults;
mod openapi_conformance;
mod planning;
mod rubric;
mod telemetry;
