//! A transition's effects as the outbox stores them (`lg:run:<id>:outbox`): what to publish
//! under which dedup id, and the run's trace.

use loopgate_common::state::Outgoing;
use serde::{Deserialize, Serialize};

/// One effect as stored in `lg:run:<id>:outbox`: what to publish, and the run's trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredEffect {
    pub(crate) effect: Outgoing,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) trace_parent: Option<String>,
}

/// `(dedup id, json)` pairs for the store.
pub(crate) fn stored_effects(
    outgoing: &[Outgoing],
    trace_parent: Option<&str>,
) -> Vec<(String, String)> {
    outgoing
        .iter()
        .map(|o| {
            let stored = StoredEffect {
                effect: o.clone(),
                trace_parent: trace_parent.map(str::to_string),
            };
            (
                o.msg_id.clone(),
                serde_json::to_string(&stored).unwrap_or_default(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use loopgate_common::state::Target;
    use loopgate_protocol::wire::{DecideRequest, Message};

    #[test]
    fn stored_effects_keep_their_dedup_id_and_trace() {
        let outgoing = vec![Outgoing {
            target: Target::Decide,
            msg_id: "r1:1:decide:1".into(),
            message: Message::DecideRequest(DecideRequest {
                run_id: "r1".into(),
                generation: 1,
                seq: 1,
            }),
        }];
        for trace in [None, Some("00-abc-def-01")] {
            let stored = stored_effects(&outgoing, trace);
            assert_eq!(stored.len(), 1);
            assert_eq!(stored[0].0, "r1:1:decide:1");
            let back: StoredEffect = serde_json::from_str(&stored[0].1).unwrap();
            assert_eq!(back.effect, outgoing[0]);
            assert_eq!(back.trace_parent.as_deref(), trace);
        }
    }
}
