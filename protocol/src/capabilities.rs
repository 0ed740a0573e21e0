//! Routes offered only while served: executor workers announce their capabilities with a
//! short TTL on a heartbeat subject; the manager keeps the announcements that have not
//! expired and offers a route only while a live worker serves it (`[manager] capabilities`
//! is the upper bound). Workers (executors and auditors) also announce the names of the model
//! profiles they are configured with (names only, never keys or URLs), so a client can offer
//! the names a task's `[roles]` may use. Pure: times are Unix milliseconds handed in.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::gui::GuiBackend;
use crate::subjects::Capability;
use crate::wire::EpisodeRole;

/// Default TTL a worker announces (how long an announcement holds without a new one).
pub const DEFAULT_CAPABILITY_TTL_SECS: u64 = 15;
/// Shortest and longest TTL accepted.
pub const MIN_CAPABILITY_TTL_SECS: u64 = 1;
pub const MAX_CAPABILITY_TTL_SECS: u64 = 300;

/// One heartbeat: this worker serves these capabilities and model profiles for `ttl_ms` from
/// when it is received. Empty `capabilities` and `profiles` withdraw the worker (it is
/// stopping). `role` and `profiles` default (executor, none) so beats from older workers parse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityBeat {
    pub worker_id: String,
    #[serde(default = "executor_role")]
    pub role: EpisodeRole,
    pub capabilities: Vec<Capability>,
    /// The names of the model profiles (and, on executors, CLI agent profiles) this worker is
    /// configured with: names a task's `[roles]` may give its role.
    #[serde(default)]
    pub profiles: Vec<String>,
    /// The gui backends this worker serves when it serves `gui`; an executor announcing `gui`
    /// with none (an older one) serves the browser.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gui_backends: Vec<GuiBackend>,
    pub ttl_ms: u64,
}

fn executor_role() -> EpisodeRole {
    EpisodeRole::Executor
}

/// What one worker announced, until when.
#[derive(Debug, Clone)]
struct Announced {
    role: EpisodeRole,
    capabilities: Vec<Capability>,
    gui_backends: Vec<GuiBackend>,
    profiles: Vec<String>,
    expires_ms: i64,
}

/// The announcements a manager has heard, by worker.
#[derive(Debug, Clone, Default)]
pub struct LiveCapabilities {
    workers: BTreeMap<String, Announced>,
}

impl LiveCapabilities {
    /// Record a heartbeat received at `now_ms`. The worker id is keyed per role, so an auditor
    /// and an executor that share an id do not replace each other.
    pub fn observe(&mut self, beat: &CapabilityBeat, now_ms: i64) {
        let key = worker_key(beat.role, &beat.worker_id);
        if beat.capabilities.is_empty() && beat.profiles.is_empty() {
            self.workers.remove(&key);
            return;
        }
        let ttl = beat.ttl_ms.clamp(
            MIN_CAPABILITY_TTL_SECS * 1000,
            MAX_CAPABILITY_TTL_SECS * 1000,
        );
        let expires = now_ms.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX));
        // Only executors serve routes: an auditor's beat never offers one.
        let capabilities = match beat.role {
            EpisodeRole::Executor => beat.capabilities.clone(),
            EpisodeRole::Auditor => Vec::new(),
        };
        let gui_backends = match (
            capabilities.contains(&Capability::Gui),
            beat.gui_backends.is_empty(),
        ) {
            (false, _) => Vec::new(),
            (true, true) => vec![GuiBackend::Browser],
            (true, false) => beat.gui_backends.clone(),
        };
        self.workers.insert(
            key,
            Announced {
                role: beat.role,
                capabilities,
                gui_backends,
                profiles: beat.profiles.clone(),
                expires_ms: expires,
            },
        );
    }

    /// Capabilities some executor serves at `now_ms` (expired announcements are dropped).
    pub fn live(&mut self, now_ms: i64) -> BTreeSet<&'static str> {
        self.expire(now_ms);
        self.workers
            .values()
            .flat_map(|a| a.capabilities.iter().map(|c| c.as_str()))
            .collect()
    }

    /// The gui backends some live executor serves at `now_ms`.
    pub fn gui_backends(&mut self, now_ms: i64) -> BTreeSet<GuiBackend> {
        self.expire(now_ms);
        self.workers
            .values()
            .flat_map(|a| a.gui_backends.iter().copied())
            .collect()
    }

    /// Whether the gui route is offered for a task needing `backend`: `gui` within the
    /// configured upper bound and a live executor serving that backend.
    pub fn offers_gui(&mut self, backend: GuiBackend, configured: bool, now_ms: i64) -> bool {
        configured && self.gui_backends(now_ms).contains(&backend)
    }

    /// The profile names live workers of `role` announce at `now_ms`, each with how many
    /// workers announce it (sorted by name).
    pub fn profiles(&mut self, role: EpisodeRole, now_ms: i64) -> BTreeMap<String, u32> {
        self.expire(now_ms);
        let mut out: BTreeMap<String, u32> = BTreeMap::new();
        for a in self.workers.values().filter(|a| a.role == role) {
            let names: BTreeSet<&String> = a.profiles.iter().collect();
            for name in names {
                *out.entry(name.clone()).or_default() += 1;
            }
        }
        out
    }

    fn expire(&mut self, now_ms: i64) {
        self.workers.retain(|_, a| a.expires_ms > now_ms);
    }

    /// Whether `capability` is offered: within the configured upper bound and served now.
    pub fn offers(&mut self, capability: Capability, configured: bool, now_ms: i64) -> bool {
        configured && self.live(now_ms).contains(capability.as_str())
    }
}

fn worker_key(role: EpisodeRole, worker_id: &str) -> String {
    match role {
        EpisodeRole::Executor => format!("executor/{worker_id}"),
        EpisodeRole::Auditor => format!("auditor/{worker_id}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(worker: &str, caps: &[Capability], ttl_ms: u64) -> CapabilityBeat {
        CapabilityBeat {
            worker_id: worker.into(),
            role: EpisodeRole::Executor,
            capabilities: caps.to_vec(),
            profiles: Vec::new(),
            gui_backends: Vec::new(),
            ttl_ms,
        }
    }

    fn profiled(
        worker: &str,
        role: EpisodeRole,
        caps: &[Capability],
        profiles: &[&str],
    ) -> CapabilityBeat {
        CapabilityBeat {
            worker_id: worker.into(),
            role,
            capabilities: caps.to_vec(),
            profiles: profiles.iter().map(|p| (*p).to_string()).collect(),
            gui_backends: Vec::new(),
            ttl_ms: 5_000,
        }
    }

    #[test]
    fn old_beats_parse_as_an_executor_without_profiles() {
        let old = r#"{"worker_id":"w","capabilities":["cli"],"ttl_ms":5000}"#;
        let beat: CapabilityBeat = serde_json::from_str(old).unwrap();
        assert_eq!(beat.role, EpisodeRole::Executor);
        assert!(beat.profiles.is_empty());
        let new =
            serde_json::to_value(profiled("a", EpisodeRole::Auditor, &[], &["judge"])).unwrap();
        assert_eq!(new["role"], "auditor");
        assert_eq!(new["profiles"][0], "judge");
    }

    #[test]
    fn profiles_table() {
        use Capability::{Cli, Gui};
        use EpisodeRole::{Auditor, Executor};
        type Beat<'a> = (&'a str, EpisodeRole, &'a [Capability], &'a [&'a str], i64);
        // (beats as (worker, role, caps, profiles, at), role asked, now, want, gui offered)
        type Case<'a> = (&'a [Beat<'a>], EpisodeRole, i64, &'a [(&'a str, u32)], bool);
        let cases: &[Case] = &[
            (&[], Executor, 0, &[], false),
            (
                &[("a", Executor, &[Cli], &["x", "y"], 0)],
                Executor,
                1,
                &[("x", 1), ("y", 1)],
                false,
            ),
            (
                &[("a", Executor, &[Cli], &["x"], 0)],
                Auditor,
                1,
                &[],
                false,
            ),
            // Expired.
            (
                &[("a", Executor, &[Cli], &["x"], 0)],
                Executor,
                5_000,
                &[],
                false,
            ),
            // Two workers announce the same name; duplicates in one beat count once.
            (
                &[
                    ("a", Executor, &[Cli], &["x", "x"], 0),
                    ("b", Executor, &[Gui], &["x"], 0),
                ],
                Executor,
                1,
                &[("x", 2)],
                true,
            ),
            // An auditor's beat never offers a route, and keeps its profiles per role.
            (
                &[("a", Auditor, &[Gui], &["judge"], 0)],
                Auditor,
                1,
                &[("judge", 1)],
                false,
            ),
            (
                &[
                    ("a", Auditor, &[], &["judge"], 0),
                    ("a", Executor, &[Cli], &["x"], 0),
                ],
                Auditor,
                1,
                &[("judge", 1)],
                false,
            ),
            // Empty capabilities and profiles withdraw the worker.
            (
                &[
                    ("a", Auditor, &[], &["judge"], 0),
                    ("a", Auditor, &[], &[], 10),
                ],
                Auditor,
                11,
                &[],
                false,
            ),
            // Profiles without capabilities keep the worker.
            (
                &[("a", Executor, &[], &["x"], 0)],
                Executor,
                1,
                &[("x", 1)],
                false,
            ),
        ];
        for (i, (beats, role, now, want, gui)) in cases.iter().enumerate() {
            let mut live = LiveCapabilities::default();
            for (w, r, caps, profiles, at) in beats.iter() {
                live.observe(&profiled(w, *r, caps, profiles), *at);
            }
            let want: BTreeMap<String, u32> =
                want.iter().map(|(n, c)| ((*n).to_string(), *c)).collect();
            assert_eq!(live.profiles(*role, *now), want, "case {i}");
            assert_eq!(live.offers(Gui, true, *now), *gui, "case {i}");
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

    #[test]
    fn gui_offered_per_backend_table() {
        use Capability::{Cli, Gui};
        use GuiBackend::{Browser, Desktop};
        // (beats as (worker, role, caps, backends, at), backend asked, now, offered)
        type Beat<'a> = (
            &'a str,
            EpisodeRole,
            &'a [Capability],
            &'a [GuiBackend],
            i64,
        );
        let e = EpisodeRole::Executor;
        let cases: &[(&[Beat], GuiBackend, i64, bool)] = &[
            // An older gui worker (no backends) serves the browser only.
            (&[("a", e, &[Gui], &[], 0)], Browser, 1, true),
            (&[("a", e, &[Gui], &[], 0)], Desktop, 1, false),
            (&[("a", e, &[Gui], &[Desktop], 0)], Desktop, 1, true),
            (&[("a", e, &[Gui], &[Desktop], 0)], Browser, 1, false),
            (
                &[("a", e, &[Gui], &[Browser, Desktop], 0)],
                Desktop,
                1,
                true,
            ),
            // Backends without `gui` serve nothing.
            (&[("a", e, &[Cli], &[Desktop], 0)], Desktop, 1, false),
            // The desktop worker's announcement expired; the browser one is live.
            (
                &[
                    ("a", e, &[Gui], &[Desktop], 0),
                    ("b", e, &[Gui], &[Browser], 4_000),
                ],
                Desktop,
                5_000,
                false,
            ),
            // The desktop worker withdrew.
            (
                &[("a", e, &[Gui], &[Desktop], 0), ("a", e, &[], &[], 10)],
                Desktop,
                11,
                false,
            ),
            // An auditor never serves a route.
            (
                &[("a", EpisodeRole::Auditor, &[Gui], &[Desktop], 0)],
                Desktop,
                1,
                false,
            ),
        ];
        for (i, (beats, backend, now, want)) in cases.iter().enumerate() {
            let mut live = LiveCapabilities::default();
            for (w, role, caps, backends, at) in beats.iter() {
                let mut b = beat(w, caps, 5_000);
                b.role = *role;
                b.gui_backends = backends.to_vec();
                live.observe(&b, *at);
            }
            assert_eq!(live.offers_gui(*backend, true, *now), *want, "case {i}");
            assert!(
                !live.offers_gui(*backend, false, *now),
                "case {i}: not configured"
            );
        }
        let old = r#"{"worker_id":"w","capabilities":["gui"],"ttl_ms":5000}"#;
        let beat: CapabilityBeat = serde_json::from_str(old).unwrap_or_else(|_| beat("x", &[], 0));
        assert!(beat.gui_backends.is_empty());
    }
}
