//! Routes offered only while served: executor workers announce their capabilities with a
//! short TTL on a heartbeat subject; the manager keeps the announcements that have not
//! expired and offers a route only while a live worker serves it (`[manager] capabilities`
//! is the upper bound). Pure: times are Unix milliseconds handed in.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::subjects::Capability;

/// Default TTL a worker announces (how long an announcement holds without a new one).
pub const DEFAULT_CAPABILITY_TTL_SECS: u64 = 15;
/// Shortest and longest TTL accepted.
pub const MIN_CAPABILITY_TTL_SECS: u64 = 1;
pub const MAX_CAPABILITY_TTL_SECS: u64 = 300;

/// One heartbeat: this worker serves these capabilities for `ttl_ms` from when it is received.
/// An empty list withdraws the worker (it is stopping).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityBeat {
    pub worker_id: String,
    pub capabilities: Vec<Capability>,
    pub ttl_ms: u64,
}

/// The announcements a manager has heard, by worker.
#[derive(Debug, Clone, Default)]
pub struct LiveCapabilities {
    workers: BTreeMap<String, (Vec<Capability>, i64)>,
}

impl LiveCapabilities {
    /// Record a heartbeat received at `now_ms`.
    pub fn observe(&mut self, beat: &CapabilityBeat, now_ms: i64) {
        if beat.capabilities.is_empty() {
            self.workers.remove(&beat.worker_id);
            return;
        }
        let ttl = beat.ttl_ms.clamp(
            MIN_CAPABILITY_TTL_SECS * 1000,
            MAX_CAPABILITY_TTL_SECS * 1000,
        );
        let expires = now_ms.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX));
        self.workers
            .insert(beat.worker_id.clone(), (beat.capabilities.clone(), expires));
    }

    /// Capabilities some worker serves at `now_ms` (expired announcements are dropped).
    pub fn live(&mut self, now_ms: i64) -> BTreeSet<&'static str> {
        self.workers.retain(|_, (_, expires)| *expires > now_ms);
        self.workers
            .values()
            .flat_map(|(caps, _)| caps.iter().map(|c| c.as_str()))
            .collect()
    }

    /// Whether `capability` is offered: within the configured upper bound and served now.
    pub fn offers(&mut self, capability: Capability, configured: bool, now_ms: i64) -> bool {
        configured && self.live(now_ms).contains(capability.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(worker: &str, caps: &[Capability], ttl_ms: u64) -> CapabilityBeat {
        CapabilityBeat {
            worker_id: worker.into(),
            capabilities: caps.to_vec(),
            ttl_ms,
        }
    }

    #[test]
    fn offers_table() {
        use Capability::{Cli, Gui};
        // (beats as (worker, caps, ttl, at), configured, now, offered)
        type Beat<'a> = (&'a str, &'a [Capability], u64, i64);
        let cases: &[(&[Beat], bool, i64, bool)] = &[
            (&[], true, 0, false),
            (&[("a", &[Cli, Gui], 5_000, 0)], true, 4_999, true),
            (&[("a", &[Cli, Gui], 5_000, 0)], true, 5_000, false),
            (&[("a", &[Cli, Gui], 5_000, 0)], false, 1, false),
            (&[("a", &[Cli], 5_000, 0)], true, 1, false),
            (
                &[("a", &[Gui], 5_000, 0), ("a", &[], 5_000, 10)],
                true,
                11,
                false,
            ),
            (
                &[("a", &[Gui], 5_000, 0), ("b", &[Gui], 5_000, 3_000)],
                true,
                6_000,
                true,
            ),
            (
                &[("a", &[Gui], 5_000, 0), ("a", &[Gui], 5_000, 4_000)],
                true,
                8_000,
                true,
            ),
            (&[("a", &[Gui], 0, 0)], true, 999, true),
            (&[("a", &[Gui], 0, 0)], true, 1_000, false),
        ];
        for (i, (beats, configured, now, want)) in cases.iter().enumerate() {
            let mut live = LiveCapabilities::default();
            for (w, caps, ttl, at) in beats.iter() {
                live.observe(&beat(w, caps, *ttl), *at);
            }
            assert_eq!(live.offers(Gui, *configured, *now), *want, "case {i}");
        }
    }
}
