//! The durable `audit` consumer is part of the topology: restricted auditor credentials may
//! only bind it (never create it: a consumer's deliver subject could push stream data into
//! any subject), so whoever owns the topology — the manager, through `ensure_topology` —
//! creates it with the auditor's default settings.

use crate::bus::{with_timeout, Bus, BusError};
use crate::work_consumer::{ConsumerOptions, Work};

impl Bus {
    /// Create the `audit` durable with default [`ConsumerOptions`] unless it exists. Looks
    /// first, so callers with read-only rights pass once it is there; an existing durable's
    /// settings are left alone.
    pub async fn ensure_audit_consumer(&self) -> Result<(), BusError> {
        let lookup = self
            .jetstream()
            .get_consumer_from_stream::<async_nats::jetstream::consumer::pull::Config, _, _>(
                Work::Audit.durable_name(),
                Work::Audit.stream_name(),
            );
        if with_timeout("audit consumer info", self.request_timeout(), lookup)
            .await
            .is_ok()
        {
            return Ok(());
        }
        self.work_consumer(Work::Audit, ConsumerOptions::default())
            .await
            .map(drop)
    }
}
