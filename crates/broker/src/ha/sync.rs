//! A slave's copy of its master's metadata: topics, subscription groups, consumer offsets and
//! delay-level progress, fetched from the master's main listener right after the slave learns
//! its master and then every [`SYNC_PERIOD`], for as long as the name servers' answers to the
//! slave's registration name a master.
//!
//! Each table is fetched and applied on its own, so one the master cannot serve leaves the
//! others current. Tables are replaced whole when they differ (topics keep their attributes),
//! never deleted and re-added entry by entry; consumer offsets merge so that a stale master
//! never moves a slave's newer offsets back (`ConsumerOffsetManager::merge_from_master`).

use std::sync::Arc;
use std::time::Duration;

use comet_config_file::ConfigData;
use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_remoting::{ClientConfig, RemotingClient};
use tokio::task::JoinHandle;

use crate::config_tables::{
    ConsumerOffsetDocument, DelayOffsetDocument, SubscriptionGroupDocument, TopicsDocument,
};
use crate::context::BrokerContext;

/// Period of the metadata copy.
pub const SYNC_PERIOD: Duration = Duration::from_secs(10);
/// Timeout of one fetch.
const FETCH_TIMEOUT: Duration = Duration::from_secs(3);

/// Copies the master's metadata until the broker stops (a slave only).
pub fn start(ctx: &Arc<BrokerContext>) -> JoinHandle<()> {
    ctx.consumer_offsets.follow_master();
    let weak = Arc::downgrade(ctx);
    let shutdown = ctx.shutdown.clone();
    let mut master = ctx.replication.master_addr();
    tokio::spawn(async move {
        let client = RemotingClient::new(ClientConfig::default());
        loop {
            let addr = master.borrow_and_update().clone();
            if let (Some(addr), Some(ctx)) = (addr, weak.upgrade()) {
                sync_all(&ctx, &client, &addr).await;
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(SYNC_PERIOD) => {}
                changed = master.changed() => if changed.is_err() { break },
            }
        }
        client.shutdown().await;
    })
}

/// One copy of every table from the master at `addr`.
pub async fn sync_all(ctx: &BrokerContext, client: &RemotingClient, addr: &str) {
    if addr == ctx.broker_addr() {
        return;
    }
    match fetch::<TopicsDocument>(client, addr, RequestCode::GetAllTopicConfig).await {
        Ok(topics) => {
            if ctx.topic_config.mirror_master(topics) {
                tracing::info!(master = addr, "topic table copied from the master");
            }
        }
        Err(e) => tracing::warn!(master = addr, error = %e, "copying the master's topics failed"),
    }
    match fetch::<SubscriptionGroupDocument>(
        client,
        addr,
        RequestCode::GetAllSubscriptiongroupConfig,
    )
    .await
    {
        Ok(groups) => match ctx.subscription_groups.mirror_master(groups) {
            Ok(true) => tracing::info!(master = addr, "subscription groups copied from the master"),
            Ok(false) => {}
            Err(e) => {
                tracing::error!(error = %e, "persisting the copied subscription groups failed")
            }
        },
        Err(e) => tracing::warn!(master = addr, error = %e, "copying the master's groups failed"),
    }
    match fetch::<ConsumerOffsetDocument>(client, addr, RequestCode::GetAllConsumerOffset).await {
        Ok(offsets) => {
            ctx.consumer_offsets
                .merge_from_master(&offsets.offset_table);
        }
        Err(e) => tracing::warn!(master = addr, error = %e, "copying the master's offsets failed"),
    }
    match fetch::<DelayOffsetDocument>(client, addr, RequestCode::GetAllDelayOffset).await {
        Ok(delay) => ctx.schedule.mirror_offsets(&delay.offset_table),
        Err(e) => {
            tracing::warn!(master = addr, error = %e, "copying the master's delay offsets failed")
        }
    }
}

/// Fetches one table; a master with nothing in it answers an error, which is not a failure
/// worth more than the log line.
async fn fetch<T: ConfigData>(
    client: &RemotingClient,
    addr: &str,
    code: RequestCode,
) -> Result<T, String> {
    let response = client
        .invoke(addr, RemotingCommand::request(code), FETCH_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    if response.code != ResponseCode::Success.code() {
        return Err(format!(
            "code {}: {}",
            response.code,
            response.remark.unwrap_or_default()
        ));
    }
    let body = response.body.as_deref().unwrap_or_default();
    let text = std::str::from_utf8(body).map_err(|e| e.to_string())?;
    T::decode(text).map_err(|e| e.to_string())
}
