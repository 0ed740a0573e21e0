//! Exporter wrappers that drive a tonic (gRPC) exporter on a runtime we own: the SDK's batch
//! processors call exporters from plain OS threads, where tonic would panic for want of a
//! Tokio reactor.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::logs::{LogBatch, LogExporter};
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use tokio::runtime::Runtime;

#[derive(Debug)]
pub struct RtSpanExporter<E> {
    inner: E,
    rt: Arc<Runtime>,
}

impl<E> RtSpanExporter<E> {
    pub fn new(inner: E, rt: Arc<Runtime>) -> Self {
        RtSpanExporter { inner, rt }
    }
}

impl<E: SpanExporter> SpanExporter for RtSpanExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.rt.block_on(self.inner.export(batch))
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let _entered = self.rt.enter();
        self.inner.shutdown_with_timeout(timeout)
    }
    fn force_flush(&self) -> OTelSdkResult {
        let _entered = self.rt.enter();
        self.inner.force_flush()
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource)
    }
}

pub struct RtMetricExporter<E> {
    inner: E,
    rt: Arc<Runtime>,
}

impl<E> RtMetricExporter<E> {
    pub fn new(inner: E, rt: Arc<Runtime>) -> Self {
        RtMetricExporter { inner, rt }
    }
}

impl<E: PushMetricExporter> PushMetricExporter for RtMetricExporter<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        self.rt.block_on(self.inner.export(metrics))
    }
    fn force_flush(&self) -> OTelSdkResult {
        let _entered = self.rt.enter();
        self.inner.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let _entered = self.rt.enter();
        self.inner.shutdown_with_timeout(timeout)
    }
    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

#[derive(Debug)]
pub struct RtLogExporter<E> {
    inner: E,
    rt: Arc<Runtime>,
}

impl<E> RtLogExporter<E> {
    pub fn new(inner: E, rt: Arc<Runtime>) -> Self {
        RtLogExporter { inner, rt }
    }
}

impl<E: LogExporter> LogExporter for RtLogExporter<E> {
    async fn export(&self, batch: LogBatch<'_>) -> OTelSdkResult {
        self.rt.block_on(self.inner.export(batch))
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let _entered = self.rt.enter();
        self.inner.shutdown_with_timeout(timeout)
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource)
    }
}
