//! The CLI's one integration test binary: runs the built `loopgate` against stand-ins.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "suite/mod.rs"]
mod suite;
