//! One module per group of user commands.

pub mod apply;
pub mod browse;
pub mod checkout;
pub mod contract;
pub mod desktop_check;
pub mod diff;
pub mod keygen;
pub mod run_commands;
pub mod steering;
pub mod submit;
pub mod transcript;
pub mod verify;
pub mod watch;
