//! The metrics endpoint (`metricsExporterType=PROM`): `GET /metrics` answers the broker's
//! figures in the Prometheus text format (0.0.4, as Apache's exporter serves it), under the names
//! and label keys of Apache RocketMQ 5.x's broker where Comet has the feature, and Comet's own
//! under `comet_`.
//!
//! Every series carries `cluster`, `node_type="broker"` and `node_id` (the broker name), plus the
//! `metricsLabel` pairs. Figures are read when scraped ([`gauges`]): lag comes from the stored
//! offsets, so it keeps growing while a group has no consumer online.
//!
//! A metric with a unit ends with it, as Apache's exporter writes its samples:
//! `rocketmq_consumer_lag_latency_milliseconds`, `rocketmq_storage_size_bytes`. Prometheus'
//! naming advice prefers seconds; the Apache names win, so existing dashboards keep working.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use comet_remoting::TransportStats;
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::context::BrokerContext;

pub mod create_times;
mod families;
pub mod gauges;
mod internals;
pub mod rpc;
pub mod sampling;
mod system;
mod table;
pub mod traffic;
mod traffic_families;
pub mod windows;

/// The registry of one broker: its constant labels and the scrape-time collector, which also
/// reports the back-pressure counters `transport` of its listeners.
pub fn registry(
    ctx: &Arc<BrokerContext>,
    transport: Vec<Arc<TransportStats>>,
) -> Result<Registry, prometheus::Error> {
    let config = &ctx.config;
    let mut labels = std::collections::HashMap::from([
        ("cluster".to_owned(), config.broker_cluster_name.clone()),
        ("node_type".to_owned(), "broker".to_owned()),
        ("node_id".to_owned(), config.broker_name.clone()),
    ]);
    // Validation has checked the pairs; a broker started without it gets none of them.
    labels.extend(config.metrics_labels().unwrap_or_default());
    let registry = Registry::new_custom(None, Some(labels))?;
    registry.register(Box::new(gauges::BrokerCollector::new(
        Arc::downgrade(ctx),
        transport,
    )))?;
    Ok(registry)
}

/// Binds the metrics endpoint.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

async fn metrics(State(registry): State<Arc<Registry>>) -> impl IntoResponse {
    let encoder = TextEncoder::new();
    let mut text = Vec::new();
    match encoder.encode(&registry.gather(), &mut text) {
        Ok(()) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)],
            text,
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("encoding the metrics failed: {e}\n").into_bytes(),
        ),
    }
}

/// Serves `/metrics` on `listener` until the broker shuts down.
pub fn serve(
    listener: TcpListener,
    ctx: &Arc<BrokerContext>,
    transport: Vec<Arc<TransportStats>>,
) -> Result<JoinHandle<()>, prometheus::Error> {
    let registry = Arc::new(registry(ctx, transport)?);
    let app = Router::new()
        .route("/metrics", get(metrics))
        .with_state(registry);
    let stop = ctx.shutdown.clone();
    Ok(tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "metrics endpoint stopped");
        }
    }))
}
