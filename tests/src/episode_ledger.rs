//! Stand-in models for fault runs that also keep a ledger of executor episodes, seen from the
//! model's side: which episode of which round called the model when, and whether it finished.
//!
//! Each run's goal carries a tag (`[run-tag N]`); the stand-in manager copies it into its step,
//! so every executor prompt names its run. Round 1 is the "first attempt" (a wrong greeting,
//! which fails its audit), round 2 the "second attempt" (the right one). An episode's first
//! model call gets a fresh nonce, written into its `write_file` call: every later call of that
//! episode carries it back in the conversation, so two episodes of one round are told apart
//! even when they run at the same time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use loopgate_test_support::{last_message_content, Reply, Script};
use serde_json::{json, Value};

/// A task for fault runs: two rounds with a stand-in whose second attempt is correct.
/// `{TAG}` is replaced by the run's tag.
pub const TAGGED_TASK: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate [run-tag {TAG}]"
[[acceptance]]
id = "prints-greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 6
self_checks = 0
# The manager asks for the second attempt: a retry of the first would be a third episode.
step_retries = 0
# The manager writes every step, the first one too (not the goal's one clause).
clause_steps = false
"#;

/// Which attempt (1: first, 2: second) a step's text asks for: the stand-in manager writes
/// `(second attempt)` once an audit has failed, `(first attempt)` otherwise.
pub fn attempt_of(step: &str) -> u32 {
    if step.contains("second attempt") {
        2
    } else {
        1
    }
}

/// The task text for run tag `tag`.
pub fn tagged_task(tag: usize) -> String {
    TAGGED_TASK.replace("{TAG}", &tag.to_string())
}

/// [`tagged_task`] whose acceptance check takes `check_secs` first (a `sleep`), so an auditor
/// killed while checking is killed mid-audit; 0: the plain task.
pub fn tagged_task_checking_for(tag: usize, check_secs: u64) -> String {
    let task = tagged_task(tag);
    if check_secs == 0 {
        return task;
    }
    task.replace(
        "check = \"test ",
        &format!("check = \"sleep {check_secs} && test "),
    )
}

/// A check duration for run `tag` in `lo..=hi` seconds, spread over the runs (deterministic,
/// so a chaos run's seed repeats it); `(0, 0)`: none.
pub fn check_secs_for(tag: usize, (lo, hi): (u64, u64)) -> u64 {
    if hi == 0 || hi < lo {
        return 0;
    }
    let spread = (tag as u64).wrapping_mul(7919) % (hi - lo + 1);
    lo + spread
}

/// One executor episode as the model saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Episode {
    pub tag: usize,
    /// 1 (first attempt) or 2 (second attempt).
    pub attempt_round: u32,
    pub nonce: u64,
    /// Unix ms of its first and its latest model call.
    pub started_ms: i64,
    pub last_call_ms: i64,
    /// Unix ms of the call answered with `finish`.
    pub finished_ms: Option<i64>,
}

impl Episode {
    /// Did `self` and `other` call the model while the other was live?
    pub fn overlaps(&self, other: &Episode) -> bool {
        self.started_ms < other.last_call_ms && other.started_ms < self.last_call_ms
    }
}

#[derive(Default)]
struct LedgerState {
    episodes: BTreeMap<u64, Episode>,
    next_nonce: u64,
    rng: u64,
}

/// The episodes the stand-in executor has seen, shared with the script's closures.
#[derive(Clone, Default)]
pub struct EpisodeLedger {
    state: Arc<Mutex<LedgerState>>,
}

/// Latency of every stand-in reply, drawn uniformly from `min..=max`.
#[derive(Debug, Clone, Copy)]
pub struct Latency {
    pub min: Duration,
    pub max: Duration,
}

impl Latency {
    pub fn fixed(d: Duration) -> Latency {
        Latency { min: d, max: d }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn tag_of(text: &str) -> Option<usize> {
    let rest = &text[text.find("[run-tag ")? + "[run-tag ".len()..];
    rest[..rest.find(']')?].trim().parse().ok()
}

fn nonce_of(text: &str) -> Option<u64> {
    let rest = &text[text.find("nonce-")? + "nonce-".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

impl EpisodeLedger {
    pub fn new(seed: u64) -> EpisodeLedger {
        let ledger = EpisodeLedger::default();
        ledger.lock().rng = seed | 1;
        ledger
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LedgerState> {
        // A panicking closure elsewhere must not hide the ledger from the report.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn delay(&self, latency: Latency) -> Duration {
        let span = latency.max.saturating_sub(latency.min).as_millis() as u64;
        if span == 0 {
            return latency.min;
        }
        let mut state = self.lock();
        state.rng ^= state.rng << 13;
        state.rng ^= state.rng >> 7;
        state.rng ^= state.rng << 17;
        latency.min + Duration::from_millis(state.rng % (span + 1))
    }

    /// Every episode seen so far.
    pub fn episodes(&self) -> Vec<Episode> {
        self.lock().episodes.values().cloned().collect()
    }

    /// The episodes of each (tag, round), in start order.
    pub fn by_round(&self) -> BTreeMap<(usize, u32), Vec<Episode>> {
        let mut map: BTreeMap<(usize, u32), Vec<Episode>> = BTreeMap::new();
        for e in self.episodes() {
            map.entry((e.tag, e.attempt_round)).or_default().push(e);
        }
        for list in map.values_mut() {
            list.sort_by_key(|e| e.started_ms);
        }
        map
    }

    /// A manager and an executor stand-in (`standin-manager`, `standin-executor`) answering
    /// after `latency`, recording every executor episode here.
    pub fn script(&self, latency: Latency) -> Script {
        let ledger = self.clone();
        let manager = Reply::dynamic(move |req: &Value| {
            let prompt = last_message_content(req, "user").unwrap_or_default();
            let tag = tag_of(&req.to_string()).unwrap_or(0);
            let text = if prompt.contains("Failing") {
                format!("Next: cli\nTask: fix hello.py [run-tag {tag}] (second attempt)")
            } else {
                format!("Next: cli\nTask: write hello.py [run-tag {tag}] (first attempt)")
            };
            Reply::delayed(ledger.delay(latency), Reply::content(text))
        });
        let ledger = self.clone();
        let executor = Reply::dynamic(move |req: &Value| ledger.executor_reply(req, latency));
        Script::new()
            .fallback("standin-manager", manager)
            .fallback("standin-executor", executor)
    }

    fn executor_reply(&self, req: &Value, latency: Latency) -> Reply {
        let body = req.to_string();
        let messages = req["messages"].as_array().cloned().unwrap_or_default();
        let last_role = messages
            .last()
            .and_then(|m| m["role"].as_str())
            .unwrap_or("")
            .to_string();
        let delay = self.delay(latency);
        let now = now_ms();
        // A later call of an episode: its own write_file call carries the nonce back.
        // (Read from the latest assistant message: the prompt may quote an earlier round's
        // file, nonce and all.)
        let own_call = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "assistant")
            .map(Value::to_string)
            .unwrap_or_default();
        if last_role == "tool" {
            if let Some(nonce) = nonce_of(&own_call) {
                if let Some(e) = self.lock().episodes.get_mut(&nonce) {
                    e.last_call_ms = now;
                    e.finished_ms = Some(now);
                }
                return Reply::delayed(
                    delay,
                    Reply::tool_call(
                        "finish",
                        json!({"summary": format!("wrote hello.py (nonce-{nonce})")}),
                    ),
                );
            }
        }
        let prompt = last_message_content(req, "user").unwrap_or_default();
        let tag = tag_of(&body).unwrap_or(0);
        let attempt_round = attempt_of(&prompt);
        let nonce = {
            let mut state = self.lock();
            state.next_nonce += 1;
            let nonce = state.next_nonce;
            state.episodes.insert(
                nonce,
                Episode {
                    tag,
                    attempt_round,
                    nonce,
                    started_ms: now,
                    last_call_ms: now,
                    finished_ms: None,
                },
            );
            nonce
        };
        let greeting = if attempt_round == 1 {
            "hello"
        } else {
            "hello, loopgate"
        };
        Reply::delayed(
            delay,
            Reply::tool_call(
                "write_file",
                json!({"path": "hello.py", "content": format!("print('{greeting}')  # nonce-{nonce}\n")}),
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_can_take_seconds_within_their_range() {
        let task = tagged_task_checking_for(3, 4);
        assert!(
            task.contains("check = \"sleep 4 && test \\\"$(python3 hello.py)"),
            "{task}"
        );
        let parsed = loopgate_common::task::parse_task_file_toml(&task).unwrap();
        assert!(parsed.acceptance[0]
            .check
            .as_deref()
            .is_some_and(|c| c.starts_with("sleep 4 && test ")));
        assert_eq!(tagged_task_checking_for(3, 0), tagged_task(3));
        for tag in 0..50 {
            let secs = check_secs_for(tag, (1, 10));
            assert!((1..=10).contains(&secs), "{tag}: {secs}");
        }
        let spread: std::collections::BTreeSet<u64> =
            (0..50).map(|t| check_secs_for(t, (1, 10))).collect();
        assert_eq!(spread.len(), 10);
        assert_eq!(check_secs_for(5, (0, 0)), 0);
    }

    #[test]
    fn tags_and_nonces_are_read_back() {
        for (text, tag, nonce) in [
            ("goal [run-tag 17] x", Some(17), None),
            ("print('x')  # nonce-42\\n", None, Some(42)),
            ("[run-tag ] nonce-", None, None),
            ("nothing", None, None),
        ] {
            assert_eq!(tag_of(text), tag, "{text}");
            assert_eq!(nonce_of(text), nonce, "{text}");
        }
    }

    #[test]
    fn overlap_needs_both_to_call_while_the_other_lives() {
        let e = |s, l| Episode {
            tag: 1,
            attempt_round: 1,
            nonce: 1,
            started_ms: s,
            last_call_ms: l,
            finished_ms: None,
        };
        for (a, b, want) in [
            (e(0, 10), e(5, 20), true),
            (e(0, 10), e(10, 20), false),
            (e(0, 10), e(11, 20), false),
            (e(5, 6), e(0, 20), true),
        ] {
            assert_eq!(a.overlaps(&b), want, "{a:?} {b:?}");
            assert_eq!(b.overlaps(&a), want, "{a:?} {b:?}");
        }
    }
}
