//! Killing a child's whole process group: children run in their own group (`process_group(0)`),
//! and the group dies when the guard is dropped, so a cancelled or timed-out episode leaves no
//! processes behind.

use rustix::process::{kill_process_group, Pid, Signal};

/// Kills a process group when dropped (or on `kill_now`).
#[derive(Debug)]
pub struct GroupKill {
    pgid: Option<Pid>,
}

impl GroupKill {
    /// The group led by the child with this pid (`None`: nothing to kill).
    pub fn for_leader(pid: Option<u32>) -> Self {
        GroupKill {
            pgid: pid
                .and_then(|id| i32::try_from(id).ok())
                .and_then(Pid::from_raw),
        }
    }

    pub fn kill_now(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // ESRCH (group already gone) is the normal case after a clean exit.
            let _ = kill_process_group(pgid, Signal::KILL);
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill_now();
    }
}
