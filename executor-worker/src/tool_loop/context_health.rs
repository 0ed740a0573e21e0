//! Context health of one agent, as CAF scores it: how full the model's window is (warn at 0.65,
//! critical at 0.80), a penalty per compaction already done, and a penalty when the agent's
//! replies keep shrinking over a sliding window (a sign of a model losing the thread). When the
//! score falls below the reset threshold, the loop has the agent write `progress.md` and
//! continues with a fresh one. Pure.

use std::collections::VecDeque;

/// Used when the model profile names no `context_window`.
pub(crate) const DEFAULT_CONTEXT_WINDOW: u64 = 32_768;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HealthPolicy {
    /// The model's window in tokens.
    pub window_tokens: u64,
    /// Utilization at which the level turns `Warn` (and old tool output is compacted).
    pub warn_ratio: f64,
    /// Utilization at which the level turns `Critical`.
    pub critical_ratio: f64,
    /// Subtracted from the score per compaction.
    pub compaction_penalty: f64,
    /// Replies the shrink check looks at (at least 4 to score).
    pub shrink_window: usize,
    /// Subtracted at most, when the newer half of the window's replies is empty compared to
    /// the older half.
    pub shrink_penalty: f64,
    /// A score below this asks for a reset.
    pub reset_below: f64,
    /// Resets one episode may do.
    pub max_resets: u32,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy {
            window_tokens: DEFAULT_CONTEXT_WINDOW,
            warn_ratio: 0.65,
            critical_ratio: 0.80,
            compaction_penalty: 0.10,
            shrink_window: 6,
            shrink_penalty: 0.20,
            reset_below: 0.50,
            max_resets: 3,
        }
    }
}

impl HealthPolicy {
    /// The default policy for a model with this window (`None`: the default window).
    pub fn for_window(window_tokens: Option<u32>) -> Self {
        HealthPolicy {
            window_tokens: window_tokens
                .map_or(DEFAULT_CONTEXT_WINDOW, u64::from)
                .max(1),
            ..HealthPolicy::default()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum HealthLevel {
    Healthy,
    Warn,
    Critical,
}

#[derive(Debug, Clone)]
pub(crate) struct ContextHealth {
    policy: HealthPolicy,
    /// Tokens in the context after the latest reply (its prompt plus the reply).
    context_tokens: u64,
    compactions: u32,
    /// Output tokens of the latest replies, oldest first.
    outputs: VecDeque<u64>,
}

impl ContextHealth {
    pub(crate) fn new(policy: HealthPolicy) -> Self {
        ContextHealth {
            policy,
            context_tokens: 0,
            compactions: 0,
            outputs: VecDeque::new(),
        }
    }

    /// One model reply: the prompt it was given and what it wrote.
    pub(crate) fn observe(&mut self, input_tokens: u64, output_tokens: u64) {
        self.context_tokens = input_tokens.saturating_add(output_tokens);
        self.outputs.push_back(output_tokens);
        while self.outputs.len() > self.policy.shrink_window {
            self.outputs.pop_front();
        }
    }

    pub(crate) fn note_compaction(&mut self) {
        self.compactions += 1;
    }

    pub(crate) fn utilization(&self) -> f64 {
        self.context_tokens as f64 / self.policy.window_tokens.max(1) as f64
    }

    pub(crate) fn level(&self) -> HealthLevel {
        let u = self.utilization();
        if u >= self.policy.critical_ratio {
            HealthLevel::Critical
        } else if u >= self.policy.warn_ratio {
            HealthLevel::Warn
        } else {
            HealthLevel::Healthy
        }
    }

    /// 0 (unusable) ..= 1 (fresh).
    pub(crate) fn score(&self) -> f64 {
        let p = &self.policy;
        let score = token_score(self.utilization(), p.warn_ratio, p.critical_ratio)
            - p.compaction_penalty * f64::from(self.compactions)
            - p.shrink_penalty * self.shrink();
        score.clamp(0.0, 1.0)
    }

    pub(crate) fn needs_reset(&self) -> bool {
        self.score() < self.policy.reset_below
    }

    /// How much the newer half of the window's replies shrank against the older half:
    /// 0 (not at all, or too few replies yet) ..= 1 (to nothing).
    pub(crate) fn shrink(&self) -> f64 {
        let n = self.outputs.len();
        if n < 4 || n < self.policy.shrink_window {
            return 0.0;
        }
        let half = n / 2;
        let mean = |values: Vec<u64>| values.iter().sum::<u64>() as f64 / values.len() as f64;
        let older = mean(self.outputs.iter().take(half).copied().collect());
        let newer = mean(self.outputs.iter().skip(n - half).copied().collect());
        if older <= 0.0 {
            return 0.0;
        }
        (1.0 - newer / older).clamp(0.0, 1.0)
    }
}

/// 1.0 at an empty window, 0.7 at `warn`, 0.4 at `critical`, 0.0 at a full window; linear in
/// between.
pub(crate) fn token_score(utilization: f64, warn: f64, critical: f64) -> f64 {
    let u = utilization.max(0.0);
    if u <= warn {
        1.0 - 0.3 * (u / warn)
    } else if u <= critical {
        0.7 - 0.3 * (u - warn) / (critical - warn)
    } else {
        (0.4 - 0.4 * (u - critical) / (1.0 - critical)).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approx(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn token_score_table() {
        let cases = [
            (0.0, 1.0),
            (0.325, 0.85),
            (0.65, 0.7),
            (0.725, 0.55),
            (0.75, 0.5),
            (0.80, 0.4),
            (0.90, 0.2),
            (1.0, 0.0),
            (1.5, 0.0),
        ];
        for (u, want) in cases {
            let got = token_score(u, 0.65, 0.80);
            assert!(approx(got, want), "u={u}: {got} != {want}");
        }
    }

    /// (name, context tokens per reply, output tokens per reply, compactions,
    ///  expected level, expected score, expected reset)
    type Case = (
        &'static str,
        Vec<u64>,
        Vec<u64>,
        u32,
        HealthLevel,
        f64,
        bool,
    );

    #[test]
    fn health_table() {
        let window = 10_000;
        let cases: Vec<Case> = vec![
            (
                "fresh",
                vec![1000],
                vec![100],
                0,
                HealthLevel::Healthy,
                1.0 - 0.3 * (0.1 / 0.65),
                false,
            ),
            (
                "at warn",
                vec![6500],
                vec![100],
                0,
                HealthLevel::Warn,
                0.7,
                false,
            ),
            (
                "reset point",
                vec![7500],
                vec![100],
                0,
                HealthLevel::Warn,
                0.5,
                false,
            ),
            (
                "past reset point",
                vec![7600],
                vec![100],
                0,
                HealthLevel::Warn,
                0.48,
                true,
            ),
            (
                "critical",
                vec![9000],
                vec![100],
                0,
                HealthLevel::Critical,
                0.2,
                true,
            ),
            (
                "two compactions below warn",
                vec![6000],
                vec![100],
                2,
                HealthLevel::Healthy,
                1.0 - 0.3 * (0.6 / 0.65) - 0.2,
                false,
            ),
            (
                "three compactions at warn",
                vec![6500],
                vec![100],
                3,
                HealthLevel::Warn,
                0.4,
                true,
            ),
            (
                "shrinking replies, full window, low use",
                vec![1000; 6],
                vec![400, 400, 400, 100, 100, 100],
                0,
                HealthLevel::Healthy,
                1.0 - 0.3 * (0.1 / 0.65) - 0.2 * 0.75,
                false,
            ),
            (
                "replies shrunk to nothing at warn: reset",
                vec![6600; 6],
                vec![400, 400, 400, 0, 0, 0],
                0,
                HealthLevel::Warn,
                0.48, // 0.68 at 0.66, minus 0.2 for replies shrunk to nothing
                true,
            ),
            (
                "window not full: no shrink penalty",
                vec![1000; 3],
                vec![400, 0, 0],
                0,
                HealthLevel::Healthy,
                1.0 - 0.3 * (0.1 / 0.65),
                false,
            ),
        ];
        for (name, contexts, outputs, compactions, level, score, reset) in cases {
            let mut health = ContextHealth::new(HealthPolicy::for_window(Some(window)));
            for (context, output) in contexts.iter().zip(&outputs) {
                health.observe(context - output, *output);
            }
            for _ in 0..compactions {
                health.note_compaction();
            }
            assert_eq!(health.level(), level, "{name}");
            assert!(
                approx(health.score(), score),
                "{name}: {} != {score}",
                health.score()
            );
            assert_eq!(health.needs_reset(), reset, "{name}");
        }
    }

    #[test]
    fn default_window_and_clamps() {
        let policy = HealthPolicy::for_window(None);
        assert_eq!(policy.window_tokens, DEFAULT_CONTEXT_WINDOW);
        let mut health = ContextHealth::new(policy);
        assert!(approx(health.score(), 1.0));
        for _ in 0..20 {
            health.note_compaction();
        }
        assert_eq!(health.score(), 0.0);
        assert_eq!(health.compactions, 20);
    }
}
