mod control_plane;
mod deploy;
mod faults;
mod planning;
mod rubric;
mod telemetry;
