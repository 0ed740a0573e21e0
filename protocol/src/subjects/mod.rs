//! NATS subjects, stream, consumer and bucket names. The one place they are spelled.

pub mod binding;

/// Default subject prefix; configurable per deployment.
pub const DEFAULT_PREFIX: &str = "loopgate";

pub const STREAM_EXEC: &str = "LG_EXEC";
pub const STREAM_AUDIT: &str = "LG_AUDIT";
pub const STREAM_RESULTS: &str = "LG_RESULTS";
pub const STREAM_EVENTS: &str = "LG_EVENTS";
/// Messages that exhausted their deliveries, kept for inspection with the reason (headers).
pub const STREAM_DEAD: &str = "LG_DEAD";
pub const SNAPSHOT_BUCKET: &str = "lg-snapshots";
/// Full outputs of acceptance checks, content-addressed like snapshot blobs.
pub const EVIDENCE_BUCKET: &str = "lg-evidence";
/// Episode claims (KV): one episode per dispatched step, and its result for redeliveries.
pub const EPISODE_BUCKET: &str = "lg-episodes";

/// Prefix of the server's advisory that a consumer gave up on a message after its last
/// delivery: `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>`. Only the
/// server publishes under `$JS.EVENT.` (no loopgate NATS user may).
pub const MAX_DELIVERIES_ADVISORY: &str = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES";

/// The advisories of every consumer of work stream `stream` that gave up on a message.
pub fn max_deliveries_advisories(stream: &str) -> String {
    format!("{MAX_DELIVERIES_ADVISORY}.{stream}.*")
}

/// The payload of a max-deliveries advisory, the fields loopgate reads (NATS's own schema
/// `io.nats.jetstream.advisory.v1.max_deliver`; other fields are ignored).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct MaxDeliveriesAdvisory {
    pub stream: String,
    pub consumer: String,
    /// The stream sequence of the message given up on.
    pub stream_seq: u64,
    pub deliveries: u64,
}

impl MaxDeliveriesAdvisory {
    /// The advisory on `subject` with `payload`, when it is one for a work stream in `streams`
    /// (its subject and its body must agree); None for anything else.
    pub fn parse(subject: &str, payload: &[u8], streams: &[&str]) -> Option<MaxDeliveriesAdvisory> {
        let rest = subject
            .strip_prefix(MAX_DELIVERIES_ADVISORY)?
            .strip_prefix('.')?;
        let (stream, consumer) = rest.split_once('.')?;
        if !streams.contains(&stream) {
            return None;
        }
        let advisory: MaxDeliveriesAdvisory = serde_json::from_slice(payload).ok()?;
        (advisory.stream == stream && advisory.consumer == consumer).then_some(advisory)
    }
}

/// Executor capabilities: which kind of step a worker can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    Cli,
    Gui,
}

impl Capability {
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Cli => "cli",
            Capability::Gui => "gui",
        }
    }
}

/// One channel of the results stream (`loopgate.result.<channel>.<run>`); who may publish on
/// it is fixed by the NATS users (`deploy/nats/loopgate-users.conf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResultChannel {
    /// `result.exec.<run>`: executors' results.
    Exec,
    /// `result.audit.<run>`: auditors' reports.
    Audit,
    /// `result.decide.<run>`: decision requests, published by managers only.
    Decide,
    /// `result.started.exec.<run>`: an executor picked a step up.
    ExecStarted,
    /// `result.started.audit.<run>`: an auditor picked an audit up.
    AuditStarted,
    /// `result.progress.exec.<run>`: a running executor episode's progress.
    ExecProgress,
    /// `result.progress.audit.<run>`: a running audit's progress.
    AuditProgress,
}

impl ResultChannel {
    /// The subject pattern, for messages and logs.
    pub fn pattern(self) -> &'static str {
        match self {
            ResultChannel::Exec => "result.exec.<run>",
            ResultChannel::Audit => "result.audit.<run>",
            ResultChannel::Decide => "result.decide.<run>",
            ResultChannel::ExecStarted => "result.started.exec.<run>",
            ResultChannel::AuditStarted => "result.started.audit.<run>",
            ResultChannel::ExecProgress => "result.progress.exec.<run>",
            ResultChannel::AuditProgress => "result.progress.audit.<run>",
        }
    }
}

/// A parsed results subject: its channel and the run it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResultSubject<'a> {
    pub channel: ResultChannel,
    pub run_id: &'a str,
}

/// Subject names under one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subjects {
    prefix: String,
}

impl Default for Subjects {
    fn default() -> Self {
        Self::new(DEFAULT_PREFIX)
    }
}

impl Subjects {
    pub fn new(prefix: &str) -> Self {
        Subjects {
            prefix: prefix.trim_end_matches('.').to_string(),
        }
    }
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
    /// `loopgate.exec.<capability>`: manager -> executor workers (work queue).
    pub fn exec(&self, capability: Capability) -> String {
        format!("{}.exec.{}", self.prefix, capability.as_str())
    }
    /// `loopgate.heartbeat.capabilities`: executor workers -> managers (core NATS), each
    /// worker's capabilities with a TTL.
    pub fn capability_heartbeat(&self) -> String {
        format!("{}.heartbeat.capabilities", self.prefix)
    }
    /// `loopgate.heartbeat.auditor`: auditor workers -> managers (core NATS), each worker's
    /// model profile names with a TTL (a subject of its own, so the NATS permissions fix a
    /// beat's role: an auditor cannot announce executor routes).
    pub fn auditor_heartbeat(&self) -> String {
        format!("{}.heartbeat.auditor", self.prefix)
    }
    pub fn exec_all(&self) -> String {
        format!("{}.exec.>", self.prefix)
    }
    /// `loopgate.audit.request`: manager -> auditor workers (work queue).
    pub fn audit_request(&self) -> String {
        format!("{}.audit.request", self.prefix)
    }
    pub fn audit_all(&self) -> String {
        format!("{}.audit.>", self.prefix)
    }
    /// `loopgate.result.exec.<run>`: executor -> any manager replica.
    pub fn exec_result(&self, run_id: &str) -> String {
        format!("{}.result.exec.{}", self.prefix, run_id)
    }
    /// `loopgate.result.audit.<run>`: auditor -> any manager replica.
    pub fn audit_result(&self, run_id: &str) -> String {
        format!("{}.result.audit.{}", self.prefix, run_id)
    }
    /// `loopgate.result.decide.<run>`: a manager asks any replica to take the next decision.
    pub fn decide(&self, run_id: &str) -> String {
        format!("{}.result.decide.{}", self.prefix, run_id)
    }
    pub fn results_all(&self) -> String {
        format!("{}.result.>", self.prefix)
    }
    /// `loopgate.result.started.exec.<run>`: an executor tells the manager it picked a step up.
    /// The subject fixes the role: executors may publish here and nowhere under `started.audit`.
    pub fn exec_started(&self, run_id: &str) -> String {
        format!("{}.result.started.exec.{}", self.prefix, run_id)
    }
    /// `loopgate.result.started.audit.<run>`: an auditor tells the manager it picked an audit up.
    pub fn audit_started(&self, run_id: &str) -> String {
        format!("{}.result.started.audit.{}", self.prefix, run_id)
    }
    /// `loopgate.result.progress.exec.<run>`: an executor reports a running episode's progress.
    pub fn exec_progress(&self, run_id: &str) -> String {
        format!("{}.result.progress.exec.{}", self.prefix, run_id)
    }
    /// `loopgate.result.progress.audit.<run>`: an auditor reports a running audit's progress.
    pub fn audit_progress(&self, run_id: &str) -> String {
        format!("{}.result.progress.audit.{}", self.prefix, run_id)
    }
    /// The results subject `subject` names (the inverse of the builders above), or `None` for
    /// anything else: another prefix, an unknown channel, the pre-role `result.started.<run>`,
    /// a run id that is empty or holds a wildcard. The run id is borrowed from `subject`.
    pub fn parse_result<'a>(&self, subject: &'a str) -> Option<ResultSubject<'a>> {
        let rest = subject
            .strip_prefix(self.prefix.as_str())?
            .strip_prefix(".result.")?;
        let (channel, run_id) = if let Some(started) = rest.strip_prefix("started.") {
            let (role, run_id) = started.split_once('.')?;
            let channel = match role {
                "exec" => ResultChannel::ExecStarted,
                "audit" => ResultChannel::AuditStarted,
                _ => return None,
            };
            (channel, run_id)
        } else if let Some(progress) = rest.strip_prefix("progress.") {
            let (role, run_id) = progress.split_once('.')?;
            let channel = match role {
                "exec" => ResultChannel::ExecProgress,
                "audit" => ResultChannel::AuditProgress,
                _ => return None,
            };
            (channel, run_id)
        } else {
            let (name, run_id) = rest.split_once('.')?;
            let channel = match name {
                "exec" => ResultChannel::Exec,
                "audit" => ResultChannel::Audit,
                "decide" => ResultChannel::Decide,
                _ => return None,
            };
            (channel, run_id)
        };
        let token_ok = !run_id.is_empty()
            && !run_id
                .chars()
                .any(|c| matches!(c, '.' | '*' | '>') || c.is_whitespace());
        token_ok.then_some(ResultSubject { channel, run_id })
    }
    /// `loopgate.control.<run>`: core NATS (not persisted) control notices for in-flight
    /// episodes, e.g. cancel.
    pub fn control(&self, run_id: &str) -> String {
        format!("{}.control.{}", self.prefix, run_id)
    }
    pub fn control_all(&self) -> String {
        format!("{}.control.>", self.prefix)
    }
    /// `loopgate.events.<run>`: run events for watchers.
    pub fn events(&self, run_id: &str) -> String {
        format!("{}.events.{}", self.prefix, run_id)
    }
    pub fn events_all(&self) -> String {
        format!("{}.events.>", self.prefix)
    }
    /// `loopgate.dead.<kind>.<run>`: a message of `kind` (`exec_result`, ...) that exhausted
    /// its deliveries (stream `LG_DEAD`).
    pub fn dead(&self, kind: &str, run_id: &str) -> String {
        format!("{}.dead.{}.{}", self.prefix, kind, run_id)
    }
    pub fn dead_all(&self) -> String {
        format!("{}.dead.>", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_deliveries_advisories_parse_only_for_work_streams() {
        let body = |stream: &str, consumer: &str| {
            format!(
                r#"{{"type":"io.nats.jetstream.advisory.v1.max_deliver","id":"x","timestamp":"2026-12-01T00:00:00Z","stream":"{stream}","consumer":"{consumer}","stream_seq":42,"deliveries":5}}"#
            )
        };
        let work = [STREAM_EXEC, STREAM_AUDIT];
        let ok = MaxDeliveriesAdvisory::parse(
            "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.LG_EXEC.exec-cli",
            body("LG_EXEC", "exec-cli").as_bytes(),
            &work,
        );
        assert_eq!(
            ok,
            Some(MaxDeliveriesAdvisory {
                stream: "LG_EXEC".into(),
                consumer: "exec-cli".into(),
                stream_seq: 42,
                deliveries: 5
            })
        );
        let refused = [
            // Another stream (the results' own last delivery is the manager's business).
            (
                "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.LG_RESULTS.manager",
                body("LG_RESULTS", "manager"),
            ),
            // Subject and body disagree.
            (
                "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.LG_EXEC.exec-cli",
                body("LG_AUDIT", "audit"),
            ),
            (
                "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.LG_AUDIT.audit",
                body("LG_AUDIT", "other"),
            ),
            // Not an advisory subject, or not JSON.
            ("loopgate.dead.exec_request.r1", body("LG_EXEC", "exec-cli")),
            (
                "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.LG_EXEC.exec-cli",
                "not json".into(),
            ),
            (
                "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIESX.LG_EXEC.exec-cli",
                body("LG_EXEC", "exec-cli"),
            ),
        ];
        for (subject, payload) in refused {
            assert_eq!(
                MaxDeliveriesAdvisory::parse(subject, payload.as_bytes(), &work),
                None,
                "{subject} {payload}"
            );
        }
        assert_eq!(
            max_deliveries_advisories(STREAM_AUDIT),
            "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.LG_AUDIT.*"
        );
    }

    #[test]
    fn subjects_under_prefix() {
        let s = Subjects::new("lg.");
        assert_eq!(s.exec(Capability::Cli), "lg.exec.cli");
        assert_eq!(s.audit_request(), "lg.audit.request");
        assert_eq!(s.exec_result("r1"), "lg.result.exec.r1");
        assert_eq!(s.decide("r1"), "lg.result.decide.r1");
        assert_eq!(Subjects::default().events("r"), "loopgate.events.r");
        assert_eq!(s.exec_started("r1"), "lg.result.started.exec.r1");
        assert_eq!(s.audit_started("r1"), "lg.result.started.audit.r1");
    }

    #[test]
    fn results_subjects_parse_back_and_nothing_else_does() {
        let s = Subjects::default();
        let run = "0190a3c2-7b1e-7c4d-9f00-123456789abc";
        let built = [
            (s.exec_result(run), ResultChannel::Exec),
            (s.audit_result(run), ResultChannel::Audit),
            (s.decide(run), ResultChannel::Decide),
            (s.exec_started(run), ResultChannel::ExecStarted),
            (s.audit_started(run), ResultChannel::AuditStarted),
            (s.exec_progress(run), ResultChannel::ExecProgress),
            (s.audit_progress(run), ResultChannel::AuditProgress),
        ];
        for (subject, channel) in built {
            assert_eq!(
                s.parse_result(&subject),
                Some(ResultSubject {
                    channel,
                    run_id: run
                }),
                "{subject}"
            );
        }
        let refused = [
            "loopgate.result.started.r1",      // the pre-role subject
            "loopgate.result.started.gui.r1",  // no such role
            "loopgate.result.progress.gui.r1", // no such role
            "loopgate.result.progress.r1",     // no role
            "loopgate.result.exec",            // no run
            "loopgate.result.exec.",           // empty run
            "loopgate.result.exec.r1.extra",   // two tokens
            "loopgate.result.exec.*",          // wildcard
            "loopgate.result.audit.>",         // wildcard
            "loopgate.result.verdict.r1",      // unknown channel
            "loopgate.exec.cli",               // not a results subject
            "other.result.exec.r1",            // another prefix
            "loopgateX.result.exec.r1",        // a longer prefix
            "loopgate.resultexec.r1",
        ];
        for subject in refused {
            assert_eq!(s.parse_result(subject), None, "{subject}");
        }
        assert_eq!(
            Subjects::new("lg").parse_result("lg.result.audit.r9"),
            Some(ResultSubject {
                channel: ResultChannel::Audit,
                run_id: "r9"
            })
        );
    }
}
