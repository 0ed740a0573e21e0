//! The one worker runtime every daemon uses: connect with patience, one shutdown token for
//! SIGTERM/SIGINT, the consume loop with its delivery keep-alive and settle step, the episode
//! cancel registry with its control-notice listener, episode claims and the one delivery path
//! of a claimed episode (`claimed_episode`), periodic tasks and capability heartbeats.

pub mod capabilities;
pub mod claimed_episode;
pub mod connect;
pub mod consume;
pub mod episode_cancels;
pub mod episode_claim;
pub mod episode_progress;
pub mod episode_started;
pub mod finished_claims;
pub mod keep_alive;
pub mod periodic;
pub mod progress_throttle;
pub mod shutdown;
pub mod topology_wait;

pub use capabilities::{announce_capabilities, Announcement, CapabilityBoard};
pub use claimed_episode::{
    publish_stored, run_claimed, ClaimedEpisode, Concluded, EpisodeWorker, ResultMessage,
    REDELIVERY_DELAY, RESULT_PUBLISH_PATIENCE,
};
pub use connect::{connect_bus, retry_with_patience, CONNECT_PATIENCE};
pub use consume::{
    run_consumer, run_gated_consumer, settle_delivery, ConsumeOptions, Lease, PullGate, Settle,
    EPISODES_PER_LOOP,
};
pub use episode_cancels::{EpisodeCancels, Registration, DISPATCH_ID_HEADER, REMEMBER_CANCELLED};
pub use episode_claim::{claim_key, ClaimGuard, Claimed, EpisodeClaims, Recorded, StoredResult};
pub use episode_progress::{report_audit_progress, report_progress};
pub use episode_started::announce_started;
pub use finished_claims::FinishedClaims;
pub use keep_alive::{progress_interval, KeepAlive};
pub use periodic::{run_periodically, FirstPass};
pub use progress_throttle::{send_throttled, PROGRESS_EVERY};
pub use shutdown::shutdown_on_signals;
pub use topology_wait::{await_topology, TopologyWait};
