mod control_plane;
mod faults;
