//! `BrokerOuterApi`: the broker's calls to the name servers (REGISTER_BROKER, UNREGISTER_BROKER).
//!
//! A RocketMQ deployment has no coordination between name servers: each broker registers its whole
//! topic table with every one of them, at start-up, every `registerNameServerPeriod` (30 s) and
//! right after a topic changes. Registrations go to all name servers concurrently, each bounded
//! by `registerBrokerTimeoutMills` (24 s, the value in force when the round starts, which the
//! caller passes); a name server that is down or slow is logged and simply tried again at the
//! next period — it must never delay the others or the broker itself.

use std::sync::Arc;
use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::body::{RegisterBrokerBody, TopicConfigSerializeWrapper};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, RegisterBrokerRequestHeader, RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader, request_with_header,
};
use comet_remoting::{ClientConfig, RemotingClient};
use futures::future::join_all;
use parking_lot::RwLock;
use thiserror::Error;

/// How a broker names itself to the name servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerIdentity {
    pub cluster_name: String,
    pub broker_name: String,
    /// `brokerIP1:listenPort`.
    pub broker_addr: String,
    /// `brokerIP1:haListenPort`.
    pub ha_server_addr: String,
    pub broker_id: i64,
}

/// Why one name server did not take a registration.
#[derive(Debug, Clone, Error)]
pub enum OuterApiError {
    #[error("name server {addr} unreachable: {reason}")]
    Transport { addr: String, reason: String },
    #[error("name server {addr} answered code {code}: {remark}")]
    Refused {
        addr: String,
        code: i32,
        remark: String,
    },
    #[error("register body could not be encoded: {0}")]
    Encode(String),
}

/// Outcome of one registration round: per name server, success or the error.
#[derive(Debug, Clone, Default)]
pub struct RegisterReport {
    pub succeeded: Vec<String>,
    pub failed: Vec<OuterApiError>,
    /// What the name servers answered a slave: its master's addresses (the first answer that
    /// names a master).
    pub master: Option<MasterAddrs>,
}

/// A slave's master as a name server knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterAddrs {
    /// The master's main address (`brokerIP1:listenPort`).
    pub addr: Option<String>,
    /// The master's HA address (`brokerIP2:haListenPort`).
    pub ha_addr: Option<String>,
}

/// `crc32(body) & 0x7FFFFFFF`, the `bodyCrc32` REGISTER_BROKER carries.
pub fn register_body_crc32(body: &[u8]) -> i32 {
    i32::try_from(crc32fast::hash(body) & 0x7FFF_FFFF).unwrap_or(0)
}

/// Client of the name servers.
pub struct BrokerOuterApi {
    client: RemotingClient,
    namesrv_addrs: RwLock<Arc<Vec<String>>>,
}

impl std::fmt::Debug for BrokerOuterApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerOuterApi")
            .field("namesrv_addrs", &self.namesrv_addrs.read())
            .finish()
    }
}

impl BrokerOuterApi {
    /// A client for `namesrv_addrs`.
    pub fn new(namesrv_addrs: Vec<String>) -> Self {
        BrokerOuterApi {
            client: RemotingClient::new(ClientConfig::default()),
            namesrv_addrs: RwLock::new(Arc::new(namesrv_addrs)),
        }
    }

    /// The name servers registered with.
    pub fn namesrv_addrs(&self) -> Arc<Vec<String>> {
        Arc::clone(&self.namesrv_addrs.read())
    }

    /// Replaces the name-server list (e.g. after an admin change).
    pub fn update_namesrv_addrs(&self, addrs: Vec<String>) {
        *self.namesrv_addrs.write() = Arc::new(addrs);
    }

    /// Registers `topics` with every name server concurrently, each call bounded by `timeout`.
    pub async fn register_broker_all(
        &self,
        identity: &BrokerIdentity,
        topics: TopicConfigSerializeWrapper,
        timeout: Duration,
    ) -> RegisterReport {
        let addrs = self.namesrv_addrs();
        let mut report = RegisterReport::default();
        if addrs.is_empty() {
            return report;
        }
        let body = RegisterBrokerBody {
            topic_config_serialize_wrapper: topics,
            filter_server_list: Vec::new(),
        };
        let body = match body.encode(false) {
            Ok(b) => bytes::Bytes::from(b),
            Err(e) => {
                report.failed.push(OuterApiError::Encode(e.to_string()));
                return report;
            }
        };
        let header = RegisterBrokerRequestHeader {
            broker_name: identity.broker_name.clone(),
            broker_addr: identity.broker_addr.clone(),
            cluster_name: identity.cluster_name.clone(),
            ha_server_addr: identity.ha_server_addr.clone(),
            broker_id: identity.broker_id,
            compressed: Some(false),
            body_crc32: Some(register_body_crc32(&body)),
            ..RegisterBrokerRequestHeader::default()
        };
        let request = request_with_header(RequestCode::RegisterBroker, &header).with_body(body);
        let calls = addrs
            .iter()
            .map(|addr| self.call(addr, request.clone(), timeout));
        for (addr, outcome) in addrs.iter().zip(join_all(calls).await) {
            match outcome {
                Ok(response) => {
                    report.succeeded.push(addr.clone());
                    if report.master.is_none()
                        && let Ok(header) = response.decode_header::<RegisterBrokerResponseHeader>()
                        && (header.master_addr.is_some() || header.ha_server_addr.is_some())
                    {
                        report.master = Some(MasterAddrs {
                            addr: header.master_addr,
                            ha_addr: header.ha_server_addr,
                        });
                    }
                }
                Err(e) => report.failed.push(e),
            }
        }
        report
    }

    /// Unregisters from every name server concurrently (shutdown), each call bounded by
    /// `timeout`.
    pub async fn unregister_broker_all(
        &self,
        identity: &BrokerIdentity,
        timeout: Duration,
    ) -> RegisterReport {
        let addrs = self.namesrv_addrs();
        let header = UnregisterBrokerRequestHeader {
            broker_name: identity.broker_name.clone(),
            broker_addr: identity.broker_addr.clone(),
            cluster_name: identity.cluster_name.clone(),
            broker_id: identity.broker_id,
            ..UnregisterBrokerRequestHeader::default()
        };
        let request = request_with_header(RequestCode::UnregisterBroker, &header);
        let calls = addrs
            .iter()
            .map(|addr| self.call(addr, request.clone(), timeout));
        let mut report = RegisterReport::default();
        for (addr, outcome) in addrs.iter().zip(join_all(calls).await) {
            match outcome {
                Ok(_) => report.succeeded.push(addr.clone()),
                Err(e) => report.failed.push(e),
            }
        }
        report
    }

    async fn call(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, OuterApiError> {
        let response = self
            .client
            .invoke(addr, request, timeout)
            .await
            .map_err(|e| OuterApiError::Transport {
                addr: addr.to_owned(),
                reason: e.to_string(),
            })?;
        if response.code == ResponseCode::Success.code() {
            Ok(response)
        } else {
            Err(OuterApiError::Refused {
                addr: addr.to_owned(),
                code: response.code,
                remark: response.remark.unwrap_or_default(),
            })
        }
    }

    /// Closes the connections to the name servers.
    pub async fn shutdown(&self) {
        self.client.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_is_masked_to_31_bits() {
        let crc = register_body_crc32(b"{\"filterServerList\":[]}");
        assert!(crc >= 0);
        assert_eq!(
            i64::from(crc),
            i64::from(crc32fast::hash(b"{\"filterServerList\":[]}") & 0x7FFF_FFFF)
        );
    }

    #[tokio::test]
    async fn unreachable_name_server_is_reported_not_fatal() {
        // Port 1 on loopback: connection refused immediately.
        let api = BrokerOuterApi::new(vec!["127.0.0.1:1".into()]);
        let identity = BrokerIdentity {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            broker_addr: "127.0.0.1:10911".into(),
            ha_server_addr: "127.0.0.1:10912".into(),
            broker_id: 0,
        };
        let report = api
            .register_broker_all(
                &identity,
                TopicConfigSerializeWrapper::default(),
                Duration::from_secs(2),
            )
            .await;
        assert!(report.succeeded.is_empty());
        assert!(matches!(
            report.failed.as_slice(),
            [OuterApiError::Transport { .. }]
        ));
        api.shutdown().await;
    }
}
