//! The text a verified run's result carries into git, pure: the default branch name of
//! `loopgate apply`, the commit message (the goal, the run, what verified it, and the
//! `Loopgate-Certificate:` trailer), and the `git format-patch`-style mbox the manager serves
//! at `GET /v1/runs/{id}/patch` around a `git diff` text.

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

/// A `git format-patch` mbox of one commit: `message` (subject line, blank line, body) by
/// loopgate at `date` (RFC 2822), then `diff` (`git diff` text). `git am` reads it.
pub fn mbox(message: &str, date: &str, diff: &str) -> String {
    let (subject, body) = message.split_once("\n\n").unwrap_or((message, ""));
    let mut out =
        String::from("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n");
    out.push_str("From: loopgate <loopgate@localhost>\n");
    out.push_str(&format!("Date: {date}\n"));
    out.push_str(&format!("Subject: [PATCH] {}\n", subject.trim()));
    out.push_str("MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n\n");
    out.push_str(body.trim_end());
    out.push_str("\n---\n");
    out.push_str(diff);
    if !diff.ends_with('\n') && !diff.is_empty() {
        out.push('\n');
    }
    out.push_str("-- \nloopgate\n\n");
    out
}

/// The message's trailers (`Key: value` lines of its last paragraph), in order.
pub fn trailers(message: &str) -> Vec<(&str, &str)> {
    let last = message.trim_end().rsplit("\n\n").next().unwrap_or("");
    last.lines()
        .filter_map(|l| l.split_once(": "))
        .filter(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        .collect()
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
        assert_eq!(
            trailers(&text),
            vec![
                ("Loopgate-Run", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"),
                ("Loopgate-Certificate", digest.as_str())
            ]
        );
    }

    #[test]
    fn the_mbox_has_the_headers_git_am_reads() {
        let text = message("Fix it").text();
        let diff = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n";
        let mbox = mbox(&text, "Sat, 05 Dec 2026 17:00:00 +0000", diff);
        assert!(
            mbox.starts_with(
                "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n\
             From: loopgate <loopgate@localhost>\n\
             Date: Sat, 05 Dec 2026 17:00:00 +0000\n\
             Subject: [PATCH] loopgate: Fix it\n"
            ),
            "{mbox}"
        );
        assert!(mbox.contains("\n\nGoal:\n  Fix it\n"), "{mbox}");
        assert!(
            mbox.contains(&format!(
                "Loopgate-Certificate: {}\n---\n{diff}-- \nloopgate\n",
                "ab".repeat(32)
            )),
            "{mbox}"
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
