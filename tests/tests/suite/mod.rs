mod control_plane;
mod deploy;
mod faults;
mod telemetry;
