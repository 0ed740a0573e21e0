//! The bench crate's one integration test binary: its harness pieces over a real stack (real
//! nats-server, redis-server and daemons) with stand-in models.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

#[path = "suite/mod.rs"]
mod suite;
