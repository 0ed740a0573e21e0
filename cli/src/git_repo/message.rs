//! The text `loopgate apply` writes, pure: the default branch name and the commit message
//! (the goal, the run, what verified it, and the `Loopgate-Certificate:` trailer).

/// The trailer naming the certificate digest, in the message's last paragraph.
pub const CERTIFICATE_TRAILER: &str = "Loopgate-Certificate";
/// The trailer naming the run.
pub const RUN_TRAILER: &str = "Loopgate-Run";

/// Characters of the goal's first line kept in the subject.
const SUBJECT_CHARS: usize = 72;

/// What the commit message says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyMessage<'a> {
    pub goal: &'a str,
    pub run_id: &'a str,
    pub snapshot: &'a str,
    pub spec_hash: &'a str,
    /// The signed audit's purpose (`final`, `round`).
    pub completed_by: &'a str,
    pub signed_by: &'a str,
    pub criteria_passing: usize,
    /// sha256 of the signed report claims (see `loopgate verify`).
    pub certificate_digest: &'a str,
}

/// `loopgate/<first 8 characters of the run id>`.
pub fn default_branch(run_id: &str) -> String {
    format!("loopgate/{}", run_id.get(..8).unwrap_or(run_id))
}

/// The goal's first non-blank line, cut to `SUBJECT_CHARS` characters.
fn subject(goal: &str) -> String {
    let line = goal
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("the run's result");
    if line.chars().count() <= SUBJECT_CHARS {
        return line.to_string();
    }
    let cut: String = line.chars().take(SUBJECT_CHARS - 3).collect();
    format!("{}...", cut.trim_end())
}

impl ApplyMessage<'_> {
    /// The commit message: subject, the goal in full, what verified the result, trailers.
    pub fn text(&self) -> String {
        let short = |id: &str| id.get(..12).unwrap_or(id).to_string();
        let mut text = format!("loopgate: {}\n\n", subject(self.goal));
        text.push_str("Goal:\n");
        for line in self.goal.trim().lines() {
            text.push_str(&format!("  {}\n", line.trim_end()).replace("  \n", "\n"));
        }
        text.push_str(&format!(
            "\nVerified by loopgate: run {} completed on snapshot {} under contract {}\n\
             (signed {} audit by auditor key {}; {} required criteria pass).\n\
             Check it again: loopgate verify {} --key FILE\n\n",
            self.run_id,
            short(self.snapshot),
            short(self.spec_hash),
            self.completed_by,
            self.signed_by,
            self.criteria_passing,
            self.run_id,
        ));
        text.push_str(&format!("{RUN_TRAILER}: {}\n", self.run_id));
        text.push_str(&format!(
            "{CERTIFICATE_TRAILER}: {}\n",
            self.certificate_digest
        ));
        text
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn message(goal: &str) -> ApplyMessage<'_> {
        ApplyMessage {
            goal,
            run_id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            snapshot: "5a4b3c2d1e0f5a4b3c2d1e0f",
            spec_hash: "ffeeddccbbaa99887766",
            completed_by: "final",
            signed_by: "0011223344556677",
            criteria_passing: 2,
            certificate_digest: "ab".repeat(32).leak(),
        }
    }

    #[test]
    fn branch_names_use_the_short_run_id() {
        assert_eq!(
            default_branch("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"),
            "loopgate/0190a1b2"
        );
        assert_eq!(default_branch("r1"), "loopgate/r1");
        assert!(git2::Branch::name_is_valid(&default_branch("0190a1b2-c3d4")).unwrap());
    }

    #[test]
    fn the_message_carries_goal_run_digest_and_trailers_last() {
        let text = message("Add a --verbose flag\nthat prints each step.\n").text();
        let digest = "ab".repeat(32);
        assert!(text.starts_with("loopgate: Add a --verbose flag\n\nGoal:\n  Add a --verbose flag\n  that prints each step.\n\n"), "{text}");
        assert!(text.contains("run 0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b completed on snapshot 5a4b3c2d1e0f under contract ffeeddccbbaa"), "{text}");
        let last = text.trim_end().rsplit("\n\n").next().unwrap();
        assert_eq!(
            last,
            format!(
                "Loopgate-Run: 0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b\nLoopgate-Certificate: {digest}"
            )
        );
        // git reads them as trailers.
        let trailers = git2::message_trailers_strs(&text).unwrap();
        let found: Vec<(&str, &str)> = trailers.iter().collect();
        assert_eq!(
            found,
            vec![
                ("Loopgate-Run", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"),
                ("Loopgate-Certificate", digest.as_str())
            ]
        );
    }

    #[test]
    fn long_or_blank_goals_make_a_short_subject() {
        let long = "x".repeat(100);
        let text = message(&long).text();
        let subject = text.lines().next().unwrap();
        assert_eq!(subject, format!("loopgate: {}...", "x".repeat(69)));
        assert!(message("\n  \n")
            .text()
            .starts_with("loopgate: the run's result\n"));
    }
}
