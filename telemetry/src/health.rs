//! What a worker's `/healthz` and `/readyz` answer. `/healthz` (liveness) fails only when the
//! process has given up serving (a work loop ended while not shutting down); `/readyz` also
//! needs every registered check to hold (the NATS connection, the work loops running) and
//! fails from the first SIGTERM on, so a stopping pod leaves its Service endpoints while it
//! finishes its episode.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

type Check = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

#[derive(Default)]
struct Inner {
    checks: Mutex<Vec<(String, Check)>>,
    failed: Mutex<Option<String>>,
    stopping: AtomicBool,
    notes: Mutex<Vec<String>>,
}

/// A cheap, clonable handle on one process's health.
#[derive(Clone, Default)]
pub struct Health {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("live", &self.live().is_ok())
            .field("ready", &self.ready().is_ok())
            .finish()
    }
}

impl Health {
    /// A readiness condition, e.g. "the NATS connection is up". Evaluated on every `/readyz`.
    pub fn add_ready_check(&self, name: &str, check: impl Fn() -> bool + Send + Sync + 'static) {
        self.add_ready_reason(name, move || {
            if check() {
                Ok(())
            } else {
                Err("not ready".into())
            }
        });
    }

    /// A readiness condition that says why it does not hold (`/readyz` answers
    /// `NAME: WHY`), e.g. "work dir space: 3 MiB free, below the 64 MiB floor".
    pub fn add_ready_reason(
        &self,
        name: &str,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) {
        if let Ok(mut checks) = self.inner.checks.lock() {
            checks.push((name.to_string(), Box::new(check)));
        }
    }

    /// A fact about how the process serves its role (e.g. "workspace overlays: off (...)"),
    /// listed one a line after `ok` by a passing `/readyz`.
    pub fn add_note(&self, note: &str) {
        if let Ok(mut notes) = self.inner.notes.lock() {
            notes.push(note.to_string());
        }
    }

    /// The notes added with [`Health::add_note`], in order.
    pub fn notes(&self) -> Vec<String> {
        self.inner
            .notes
            .lock()
            .map(|notes| notes.clone())
            .unwrap_or_default()
    }

    /// The process no longer serves its role (liveness fails, so does readiness).
    pub fn fail(&self, why: &str) {
        if let Ok(mut failed) = self.inner.failed.lock() {
            failed.get_or_insert_with(|| why.to_string());
        }
    }

    /// Readiness fails from now on: the process is shutting down.
    pub fn set_stopping(&self) {
        self.inner.stopping.store(true, Ordering::SeqCst);
    }

    /// [`Health::set_stopping`] once `shutdown` fires.
    pub fn stop_on(&self, shutdown: &CancellationToken) {
        let (health, shutdown) = (self.clone(), shutdown.clone());
        tokio::spawn(async move {
            shutdown.cancelled().await;
            health.set_stopping();
        });
    }

    /// `Err(why)` when the process has given up.
    pub fn live(&self) -> Result<(), String> {
        match self.inner.failed.lock().ok().and_then(|f| f.clone()) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// `Err(why)` unless live, not stopping, with at least one check and every check holding.
    pub fn ready(&self) -> Result<(), String> {
        self.live()?;
        if self.inner.stopping.load(Ordering::SeqCst) {
            return Err("shutting down".into());
        }
        let checks = self
            .inner
            .checks
            .lock()
            .map_err(|_| "health state poisoned".to_string())?;
        if checks.is_empty() {
            return Err("starting".into());
        }
        for (name, check) in checks.iter() {
            check().map_err(|why| format!("{name}: {why}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_needs_every_check_and_no_shutdown() {
        let up = Arc::new(AtomicBool::new(false));
        let h = Health::default();
        assert_eq!(h.ready(), Err("starting".into()));
        let flag = up.clone();
        h.add_ready_check("nats", move || flag.load(Ordering::SeqCst));
        h.add_ready_check("work loops", || true);
        // (nats up, stopping, failed) -> (live, ready)
        for (nats, stopping, failed, live, ready) in [
            (false, false, false, true, false),
            (true, false, false, true, true),
            (true, true, false, true, false),
            (true, true, true, false, false),
        ] {
            up.store(nats, Ordering::SeqCst);
            if stopping {
                h.set_stopping();
            }
            if failed {
                h.fail("work loop ended");
            }
            assert_eq!(h.live().is_ok(), live, "{nats} {stopping} {failed}");
            assert_eq!(h.ready().is_ok(), ready, "{nats} {stopping} {failed}");
        }
        assert_eq!(h.live(), Err("work loop ended".into()));
    }

    #[test]
    fn a_reason_check_says_why() {
        let h = Health::default();
        h.add_ready_check("nats", || true);
        let full = Arc::new(AtomicBool::new(true));
        let flag = full.clone();
        h.add_ready_reason("work dir space", move || {
            if flag.load(Ordering::SeqCst) {
                Err("1 MiB free, below the 64 MiB floor".into())
            } else {
                Ok(())
            }
        });
        assert_eq!(
            h.ready(),
            Err("work dir space: 1 MiB free, below the 64 MiB floor".into())
        );
        full.store(false, Ordering::SeqCst);
        assert_eq!(h.ready(), Ok(()));
    }
}
