//! The metrics endpoint (`metricsExporterType=PROM`): `GET /metrics` answers the broker's
//! figures in the Prometheus text format (OpenMetrics 1.0), under the names and label keys of
//! Apache RocketMQ 5.x's broker where Comet has the feature, and Comet's own under `comet_`.
//!
//! Every series carries `cluster`, `node_type="broker"` and `node_id` (the broker name), plus the
//! `metricsLabel` pairs. Figures are read when scraped ([`gauges`]): lag comes from the stored
//! offsets, so it keeps growing while a group has no consumer online.
//!
//! Units follow the OpenMetrics rule that a metric with a unit ends with it, which is also what
//! Apache's exporter writes for its samples: `rocketmq_consumer_lag_latency_milliseconds`,
//! `rocketmq_storage_size_bytes`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::context::BrokerContext;

pub mod gauges;

/// Content type of an OpenMetrics text exposition.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The registry of one broker: its constant labels and the scrape-time collector.
pub fn registry(ctx: &Arc<BrokerContext>) -> Registry {
    let config = &ctx.config;
    let mut labels: Vec<(
        std::borrow::Cow<'static, str>,
        std::borrow::Cow<'static, str>,
    )> = vec![
        ("cluster".into(), config.broker_cluster_name.clone().into()),
        ("node_type".into(), "broker".into()),
        ("node_id".into(), config.broker_name.clone().into()),
    ];
    // Validation has checked the pairs; a broker started without it gets none of them.
    for (k, v) in config.metrics_labels().unwrap_or_default() {
        labels.push((k.into(), v.into()));
    }
    let mut registry = Registry::with_labels(labels.into_iter());
    registry.register_collector(Box::new(gauges::BrokerCollector::new(Arc::downgrade(ctx))));
    registry
}

/// Binds the metrics endpoint.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

async fn metrics(State(registry): State<Arc<Registry>>) -> impl IntoResponse {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &registry) {
        Ok(()) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)],
            text,
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("encoding the metrics failed: {e}\n"),
        ),
    }
}

/// Serves `/metrics` on `listener` until the broker shuts down.
pub fn serve(listener: TcpListener, ctx: &Arc<BrokerContext>) -> JoinHandle<()> {
    let registry = Arc::new(registry(ctx));
    let app = Router::new()
        .route("/metrics", get(metrics))
        .with_state(registry);
    let stop = ctx.shutdown.clone();
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "metrics endpoint stopped");
        }
    })
}
