//! Test support for loopgate: starts REAL nats-server, redis-server and llama-server processes
//! on free loopback ports, each killed (and reaped) on drop, plus helpers to locate the
//! workspace binaries and to wait on readiness without fixed sleeps, and a TCP proxy that
//! injects network faults between a daemon and its servers, and small tmpfs mounts that fill
//! up (full disks).
//!
//! Binaries are looked up in `LOOPGATE_<NAME>` env vars, then `~/.cache/loopgate/bin/`
//! (installed by `scripts/install-deps.sh`), then `PATH`.

mod binaries;
mod child_guard;
mod desktop_tools;
mod errors;
mod fault_proxy;
mod forged_objects;
mod http_probe;
mod local_model;
mod nats_cluster;
mod nats_server;
mod readiness;
mod redis_command;
mod redis_sentinel;
mod redis_server;
mod standin;
mod tmpfs;

pub use binaries::{cache_dir, find_binary, workspace_bin};
pub use child_guard::ChildGuard;
pub use desktop_tools::desktop_tools_or_skip;
pub use errors::SupportError;
pub use fault_proxy::{FaultProxy, ProxyFault};
pub use forged_objects::{date_back, plant_paged_manifest, put_object, record_size, PAGE_ENTRIES};
pub use http_probe::{http_get, HttpReply};
pub use local_model::LocalModel;
pub use nats_cluster::{meta_leader, wait_healthy as wait_cluster_healthy, NatsCluster};
pub use nats_server::NatsServer;
pub use readiness::{free_port, wait_until, WaitTimedOut};
pub use redis_command::command_as as redis_command_as;
pub use redis_sentinel::{RedisHa, RedisSentinel, MASTER_NAME as REDIS_MASTER_NAME};
pub use redis_server::RedisServer;
pub use standin::{
    last_message_content, last_tool_result, Fault, RecordedImage, Reply, Script, StandInModel,
};
pub use tmpfs::Tmpfs;
