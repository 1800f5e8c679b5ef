//! Broker-level and name-server administration: a broker's runtime figures
//! (GET_BROKER_RUNTIME_INFO, mqadmin `brokerStatus`), its settings (GET_BROKER_CONFIG /
//! UPDATE_BROKER_CONFIG), one of its statistics (VIEW_BROKER_STATS_DATA), a producer group's
//! connections (GET_PRODUCER_CONNECTION_LIST) or every producer of a broker
//! (GET_ALL_PRODUCER_INFO), the name servers' settings (GET_NAMESRV_CONFIG /
//! UPDATE_NAMESRV_CONFIG) and a broker's write permission in the name servers' routes
//! (WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER).
//!
//! Settings travel as Java properties text, one `key=value` per line.

use std::collections::BTreeMap;

use comet_protocol::body::{
    BrokerStatsData, KvTable, ProducerConnection, ProducerTableInfo, from_fastjson,
};
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{
    AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader, CommandHeader,
    CommandHeaderExt, GetProducerConnectionListRequestHeader, ViewBrokerStatsDataRequestHeader,
    WipeWritePermOfBrokerRequestHeader, WipeWritePermOfBrokerResponseHeader,
};

use super::{MQAdmin, route_masters};
use crate::error::{ClientError, Result};

/// Reads Java properties text (`key=value` or `key:value` lines; `#` and `!` comments) into a
/// sorted map. Values keep their inner spaces; keys and values are trimmed.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .map(|l| match l.find(['=', ':']) {
            Some(i) => (l[..i].trim().to_owned(), l[i + 1..].trim().to_owned()),
            None => (l.to_owned(), String::new()),
        })
        .collect()
}

/// Writes `key=value` lines, the form UPDATE_BROKER_CONFIG and UPDATE_NAMESRV_CONFIG read.
pub fn properties_text(settings: &BTreeMap<String, String>) -> String {
    settings.iter().map(|(k, v)| format!("{k}={v}\n")).collect()
}

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

    /// The ACL 1.0 accounts of the broker at `addr` (GET_BROKER_CLUSTER_ACL_CONFIG): its global
    /// white list and every account with its permissions. Comet's broker answers admins only,
    /// never with a secret key, and fails when ACL is off.
    pub async fn acl_config(&self, addr: &str) -> Result<comet_protocol::body::acl::AclConfigBody> {
        let response = self
            .invoke_broker(
                addr,
                self.api.request(RequestCode::GetBrokerClusterAclConfig),
            )
            .await?;
        Ok(comet_protocol::body::from_fastjson(
            response.body.as_deref().unwrap_or_default(),
        )?)
    }

    /// The settings of the broker at `addr` (GET_BROKER_CONFIG), sorted by key.
    pub async fn broker_config(&self, addr: &str) -> Result<BTreeMap<String, String>> {
        let response = self
            .invoke_broker(addr, self.api.request(RequestCode::GetBrokerConfig))
            .await?;
        let body = response.body.as_deref().unwrap_or_default();
        Ok(parse_properties(&String::from_utf8_lossy(body)))
    }

    /// Changes settings of the broker at `addr` while it runs (UPDATE_BROKER_CONFIG), the call
    /// behind `mqadmin updateBrokerConfig`. The broker decides which keys it accepts. Comet's
    /// broker takes the update whole or not at all: it checks every key, writes the change to its
    /// config file so a restart keeps it, and puts it in force, so [`MQAdmin::broker_config`]
    /// shows it at once. A refusal is [`ClientError::Broker`] with the broker's code and reason,
    /// and nothing changed: NO_PERMISSION (16) for a black-listed key (`brokerConfigPath`,
    /// `rocketmqHome`, `configBlackList`, ...), INVALID_PARAMETER (29) for an unknown key, a key
    /// read only at start or a bad value, SYSTEM_ERROR (1) when the config file cannot be
    /// written. Apache's broker accepts unknown keys and bad values silently.
    pub async fn update_broker_config(
        &self,
        addr: &str,
        settings: &BTreeMap<String, String>,
    ) -> Result<()> {
        let request = self
            .api
            .request(RequestCode::UpdateBrokerConfig)
            .with_body(properties_text(settings).into_bytes());
        self.invoke_broker(addr, request).await?;
        Ok(())
    }

    /// The settings of every name server (GET_NAMESRV_CONFIG), by address.
    pub async fn namesrv_config(&self) -> Result<BTreeMap<String, BTreeMap<String, String>>> {
        let mut all = BTreeMap::new();
        for addr in self.api.name_server_address_list() {
            let response = self
                .invoke_broker(&addr, self.api.request(RequestCode::GetNamesrvConfig))
                .await?;
            let body = response.body.as_deref().unwrap_or_default();
            all.insert(addr, parse_properties(&String::from_utf8_lossy(body)));
        }
        Ok(all)
    }

    /// Changes settings of every name server (UPDATE_NAMESRV_CONFIG); returns their addresses.
    pub async fn update_namesrv_config(
        &self,
        settings: &BTreeMap<String, String>,
    ) -> Result<Vec<String>> {
        let addrs = self.api.name_server_address_list();
        for addr in &addrs {
            let request = self
                .api
                .request(RequestCode::UpdateNamesrvConfig)
                .with_body(properties_text(settings).into_bytes());
            self.invoke_broker(addr, request).await?;
        }
        Ok(addrs)
    }

    /// Takes the write permission of broker `broker_name` out of every name server's routes
    /// (WIPE_WRITE_PERM_OF_BROKER): producers stop sending to it. Returns, per name server, how
    /// many topics changed.
    pub async fn wipe_write_perm(&self, broker_name: &str) -> Result<BTreeMap<String, i32>> {
        let header = WipeWritePermOfBrokerRequestHeader {
            broker_name: broker_name.to_owned(),
            ..Default::default()
        };
        self.count_on_every_name_server(
            RequestCode::WipeWritePermOfBroker,
            &header,
            |a: WipeWritePermOfBrokerResponseHeader| a.wipe_topic_count,
        )
        .await
    }

    /// Gives the write permission of broker `broker_name` back in every name server's routes
    /// (ADD_WRITE_PERM_OF_BROKER). Returns, per name server, how many topics changed.
    pub async fn add_write_perm(&self, broker_name: &str) -> Result<BTreeMap<String, i32>> {
        let header = AddWritePermOfBrokerRequestHeader {
            broker_name: broker_name.to_owned(),
            ..Default::default()
        };
        self.count_on_every_name_server(
            RequestCode::AddWritePermOfBroker,
            &header,
            |a: AddWritePermOfBrokerResponseHeader| a.add_topic_count,
        )
        .await
    }

    /// Sends `code` with `header` to every name server in turn; the count each answer's header
    /// carries, by name server address.
    async fn count_on_every_name_server<H: CommandHeader, A: CommandHeader>(
        &self,
        code: RequestCode,
        header: &H,
        count: impl Fn(A) -> i32,
    ) -> Result<BTreeMap<String, i32>> {
        let mut counts = BTreeMap::new();
        for addr in self.api.name_server_address_list() {
            let request = self.api.request_with(code, header);
            let response = self.invoke_broker(&addr, request).await?;
            counts.insert(addr, count(response.decode_header()?));
        }
        Ok(counts)
    }

    /// One statistic of the broker at `addr` (VIEW_BROKER_STATS_DATA): `stats_name` such as
    /// `TOPIC_PUT_NUMS` (key: a topic) or `GROUP_GET_NUMS` (key: `topic@group`).
    pub async fn view_broker_stats(
        &self,
        addr: &str,
        stats_name: &str,
        stats_key: &str,
    ) -> Result<BrokerStatsData> {
        let header = ViewBrokerStatsDataRequestHeader {
            stats_name: stats_name.to_owned(),
            stats_key: stats_key.to_owned(),
            ..Default::default()
        };
        let request = self
            .api
            .request_with(RequestCode::ViewBrokerStatsData, &header);
        let response = self.invoke_broker(addr, request).await?;
        Ok(from_fastjson(response.body.as_deref().unwrap_or_default())?)
    }

    /// Every producer connected to the broker at `addr`, by producer group
    /// (GET_ALL_PRODUCER_INFO, a 5.x request).
    pub async fn all_producers(&self, addr: &str) -> Result<ProducerTableInfo> {
        let response = self
            .invoke_broker(addr, self.api.request(RequestCode::GetAllProducerInfo))
            .await?;
        Ok(from_fastjson(response.body.as_deref().unwrap_or_default())?)
    }

    /// The connections of producer group `group`, asked of every master of `topic`'s route
    /// (GET_PRODUCER_CONNECTION_LIST) and merged. Fails when no broker has one.
    pub async fn producer_connections(
        &self,
        group: &str,
        topic: &str,
    ) -> Result<ProducerConnection> {
        let header = GetProducerConnectionListRequestHeader {
            producer_group: group.to_owned(),
            ..Default::default()
        };
        let mut merged = ProducerConnection::default();
        let mut last_error = None;
        for (_, addr) in route_masters(&self.topic_route(topic).await?) {
            let request = self
                .api
                .request_with(RequestCode::GetProducerConnectionList, &header);
            match self.invoke_broker(&addr, request).await {
                Ok(response) => {
                    let conn: ProducerConnection =
                        from_fastjson(response.body.as_deref().unwrap_or_default())?;
                    merged.connection_set.extend(conn.connection_set);
                }
                Err(e) => last_error = Some(e),
            }
        }
        if merged.connection_set.is_empty() {
            return Err(last_error.unwrap_or_else(|| {
                ClientError::Client(format!("producer group {group} is not online"))
            }));
        }
        Ok(merged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_round_trip() {
        let parsed =
            parse_properties("# comment\nbrokerName=broker-a\nlistenPort : 10911\n\nempty=\n");
        assert_eq!(
            parsed.get("brokerName").map(String::as_str),
            Some("broker-a")
        );
        assert_eq!(parsed.get("listenPort").map(String::as_str), Some("10911"));
        assert_eq!(parsed.get("empty").map(String::as_str), Some(""));
        assert_eq!(parsed.len(), 3);
        assert_eq!(
            properties_text(&parsed),
            "brokerName=broker-a\nempty=\nlistenPort=10911\n"
        );
    }
}
