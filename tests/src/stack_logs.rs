//! What a stack's daemons wrote: tails for assertion messages, whole logs copied out.

use crate::Stack;

impl Stack {
    pub fn manager_log(&self) -> String {
        self.managers
            .iter()
            .map(|m| m.child.log_text())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// All daemon logs, for assertion messages.
    pub fn logs(&self) -> String {
        let mut s = String::new();
        for m in &self.managers {
            s.push_str(&format!(
                "--- {} ---\n{}\n",
                m.child.name(),
                m.child.log_tail(6000)
            ));
        }
        for e in &self.executors {
            s.push_str(&format!("--- {} ---\n{}\n", e.name(), e.log_tail(4000)));
        }
        for a in std::iter::once(&self.auditor).chain(&self.more_auditors) {
            s.push_str(&format!("--- {} ---\n{}\n", a.name(), a.log_tail(4000)));
        }
        s
    }

    /// Copy every daemon's whole log (managers killed earlier included; a restarted worker's
    /// log holds its earlier processes' too) into `dir` as `<name>.log`; how many.
    pub fn copy_logs(&self, dir: &std::path::Path) -> anyhow::Result<usize> {
        std::fs::create_dir_all(dir)?;
        let children = self
            .managers
            .iter()
            .map(|m| &m.child)
            .chain(&self.retired_managers)
            .chain(&self.executors)
            .chain(std::iter::once(&self.auditor))
            .chain(&self.more_auditors);
        let mut copied = 0;
        for child in children {
            std::fs::copy(child.log_path(), dir.join(format!("{}.log", child.name())))?;
            copied += 1;
        }
        Ok(copied)
    }
}
