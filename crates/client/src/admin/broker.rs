//! Broker-level administration: a broker's runtime figures (GET_BROKER_RUNTIME_INFO, mqadmin
//! `brokerStatus`).

use std::collections::BTreeMap;

use comet_protocol::body::KvTable;
use comet_protocol::code::RequestCode;

use super::MQAdmin;
use crate::error::Result;

impl MQAdmin {
    /// The runtime figures of the broker at `addr` (store offsets, put and get counts, and on
    /// Comet the replication figures), sorted by name.
    pub async fn broker_runtime_info(&self, addr: &str) -> Result<BTreeMap<String, String>> {
        let response = self
            .invoke_broker(addr, self.api.request(RequestCode::GetBrokerRuntimeInfo))
            .await?;
        let table: KvTable =
            comet_protocol::body::from_fastjson(response.body.as_deref().unwrap_or_default())?;
        Ok(table.table.into_iter().collect())
    }
}
