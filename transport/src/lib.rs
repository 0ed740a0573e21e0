//! loopgate-transport: the NATS JetStream bus every binary shares — connection, the deployment's
//! topology, work consumers and control notices — and the one worker runtime on top of it
//! (`runtime`: connect, shutdown, consume/keep-alive/settle, episode claims and cancels, the
//! claimed-episode delivery path). Snapshots live in `loopgate-snapshot`, child processes in
//! `loopgate-process`, telemetry in `loopgate-telemetry`, and the Redis run store in the manager
//! (its only user).

pub mod bus;
mod bus_error;
mod given_up;
mod publish_watch;
pub mod runtime;
mod sizing;
mod topology;
pub mod work_consumer;

pub use bus::{
    inbox_prefix_for_user, Bus, BusOptions, Subscriber, DUPLICATE_WINDOW, EVENTS_MAX_AGE,
};
pub use bus_error::{
    AckError, AckErrorKind, BoxedSource, BusError, ClaimError, ClaimErrorKind, ConsumerError,
    ConsumerErrorKind, CoreError, CoreErrorKind, NatsError, PublishError, PublishErrorKind,
    StreamError, StreamErrorKind, TopologyError, TopologyErrorKind,
};
pub use given_up::GivenUpWork;
pub use sizing::TopologyOptions;
pub use topology::TopologyRole;
pub use work_consumer::{ConsumerOptions, Delivery, ProgressHandle, Work, WorkConsumer};
