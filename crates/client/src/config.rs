//! `ClientConfig`: what every producer and consumer of a process shares — where the name servers
//! are, and who this client is.
//!
//! The client id (`ip@instanceName[@unitName]`) is how a broker tells the members of a consumer
//! group apart, and rebalance sorts by it, so two consumers of one group in one process must not
//! share it: that is why producers and clustering consumers replace the default instance name with
//! the process id and a nanosecond clock reading ([`ClientConfig::change_instance_name_to_pid`]),
//! which also gives each of them its own client instance within one process. Producers and
//! consumers whose configs yield the same client id (an instance name set explicitly) share one
//! [`crate::MQClientInstance`].

/// TLS settings of a client: server name, trust roots (system or a PEM file) and RocketMQ's test
/// mode (`insecure_skip_verify`, for brokers with self-signed certificates).
pub use comet_remoting::{ClientTlsConfig as ClientTls, TrustRoots};
use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::time::Duration;

use comet_acl::SessionCredentials;
use comet_protocol::{LanguageCode, SerializeType};

/// The instance name nobody chose.
pub const DEFAULT_INSTANCE_NAME: &str = "DEFAULT";
/// Environment variable holding the name server list (`host:port;host:port`).
pub const NAMESRV_ADDR_ENV: &str = "NAMESRV_ADDR";
/// Separator of name server addresses.
pub const NAMESRV_ADDR_SEPARATOR: char = ';';
/// Route refresh period (`pollNameServerInterval`).
pub const DEFAULT_POLL_NAME_SERVER_INTERVAL: Duration = Duration::from_secs(30);
/// Heartbeat period (`heartbeatBrokerInterval`).
pub const DEFAULT_HEARTBEAT_BROKER_INTERVAL: Duration = Duration::from_secs(30);
/// Consumer offset persistence period (`persistConsumerOffsetInterval`).
pub const DEFAULT_PERSIST_CONSUMER_OFFSET_INTERVAL: Duration = Duration::from_secs(5);
/// Timeout of client RPCs other than sends (`mqClientApiTimeout`).
pub const DEFAULT_MQ_CLIENT_API_TIMEOUT: Duration = Duration::from_secs(3);
/// Rebalance period (`rocketmq.client.rebalance.waitInterval`).
pub const DEFAULT_REBALANCE_INTERVAL: Duration = Duration::from_secs(20);
/// Environment variable overriding [`DEFAULT_REBALANCE_INTERVAL`], in milliseconds (the Java
/// system property `rocketmq.client.rebalance.waitInterval`).
pub const REBALANCE_INTERVAL_ENV: &str = "ROCKETMQ_CLIENT_REBALANCE_WAIT_INTERVAL";
/// A public address used only to ask the kernel which local interface routes outward; no packet
/// is sent (connecting a UDP socket only selects a route).
const ROUTE_PROBE_ADDR: (Ipv4Addr, u16) = (Ipv4Addr::new(192, 0, 2, 1), 9);

/// Settings shared by every producer and consumer of one client instance.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// Name server addresses, `;`-separated. Defaults to the `NAMESRV_ADDR` environment variable.
    pub namesrv_addr: String,
    /// This host's address as announced in the client id and message ids.
    pub client_ip: String,
    /// Second part of the client id; [`DEFAULT_INSTANCE_NAME`] unless set.
    pub instance_name: String,
    /// Optional third part of the client id.
    pub unit_name: Option<String>,
    /// Route refresh period (Java `pollNameServerInterval`, 30 s).
    pub poll_name_server_interval: Duration,
    /// Heartbeat period (Java `heartbeatBrokerInterval`, 30 s).
    pub heartbeat_broker_interval: Duration,
    /// Consumer offset persistence period (Java `persistConsumerOffsetInterval`, 5 s).
    pub persist_consumer_offset_interval: Duration,
    /// How often the RebalanceService runs without being woken.
    pub rebalance_interval: Duration,
    /// Timeout of every RPC except sends (which use the producer's send timeout).
    pub mq_client_api_timeout: Duration,
    /// Header codec of requests.
    pub serialize_type: SerializeType,
    /// Language announced in every request.
    pub language: LanguageCode,
    /// Resource namespace (prefixes topics and groups as `ns%name`).
    pub namespace: Option<String>,
    /// ACL credentials: when set, every request is signed with them (RocketMQ's
    /// `AclClientRPCHook`), as brokers with `aclEnable=true` require.
    pub credentials: Option<SessionCredentials>,
    /// TLS for every connection (name servers and brokers), RocketMQ's `tls.enable`/`useTLS`.
    /// `None` connects in plaintext.
    pub tls: Option<ClientTls>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            namesrv_addr: std::env::var(NAMESRV_ADDR_ENV).unwrap_or_default(),
            client_ip: local_ip().to_string(),
            instance_name: DEFAULT_INSTANCE_NAME.to_string(),
            unit_name: None,
            poll_name_server_interval: DEFAULT_POLL_NAME_SERVER_INTERVAL,
            heartbeat_broker_interval: DEFAULT_HEARTBEAT_BROKER_INTERVAL,
            persist_consumer_offset_interval: DEFAULT_PERSIST_CONSUMER_OFFSET_INTERVAL,
            rebalance_interval: rebalance_interval_from_env(),
            mq_client_api_timeout: DEFAULT_MQ_CLIENT_API_TIMEOUT,
            serialize_type: SerializeType::Json,
            language: LanguageCode::Rust,
            namespace: None,
            credentials: None,
            tls: None,
        }
    }
}

impl ClientConfig {
    /// A default config pointing at `namesrv_addr`.
    pub fn new(namesrv_addr: impl Into<String>) -> Self {
        ClientConfig {
            namesrv_addr: namesrv_addr.into(),
            ..ClientConfig::default()
        }
    }

    /// The transport settings of the instance's remoting client.
    pub(crate) fn remoting_config(&self) -> comet_remoting::ClientConfig {
        comet_remoting::ClientConfig {
            serialize_type: self.serialize_type,
            tls: self.tls.clone(),
            ..comet_remoting::ClientConfig::default()
        }
    }

    /// `clientIP@instanceName[@unitName]`, the Java client's client id format.
    pub fn build_client_id(&self) -> String {
        let mut id = format!("{}@{}", self.client_ip, self.instance_name);
        if let Some(unit) = self.unit_name.as_deref().filter(|u| !u.is_empty()) {
            id.push('@');
            id.push_str(unit);
        }
        id
    }

    /// Replaces the instance name with `<pid>#<nanoseconds>` when it is still the default, as the
    /// Java client does: clients in different processes on one host get different client ids,
    /// and so do two producers or consumers of one process, each then running its own client
    /// instance (two consumers of one group in one process are two members of the group instead
    /// of a duplicate registration). An instance name set explicitly is kept, so configs naming
    /// the same instance still share it.
    pub fn change_instance_name_to_pid(&mut self) {
        if self.instance_name == DEFAULT_INSTANCE_NAME {
            self.instance_name = format!("{}#{}", std::process::id(), unique_nanos());
        }
    }

    /// The configured name server addresses, trimmed, empties dropped.
    pub fn namesrv_addrs(&self) -> Vec<String> {
        self.namesrv_addr
            .split(NAMESRV_ADDR_SEPARATOR)
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// `name` with the namespace prefix (`ns%name`), unless it already has it or is a system
    /// resource of another namespace-aware form.
    pub fn with_namespace(&self, name: &str) -> String {
        self.namespaced(name).into_owned()
    }

    /// [`Self::with_namespace`], borrowing `name` when no prefix is added (a send renames its
    /// topic only when there is a namespace).
    pub fn namespaced<'a>(&self, name: &'a str) -> Cow<'a, str> {
        match self.namespace.as_deref().filter(|ns| !ns.is_empty()) {
            Some(ns)
                if !name
                    .strip_prefix(ns)
                    .is_some_and(|rest| rest.starts_with('%')) =>
            {
                Cow::Owned(format!("{ns}%{name}"))
            }
            _ => Cow::Borrowed(name),
        }
    }

    /// `name` without this config's namespace prefix (the inverse of [`Self::with_namespace`]).
    pub fn without_namespace<'a>(&self, name: &'a str) -> &'a str {
        match self.namespace.as_deref().filter(|ns| !ns.is_empty()) {
            Some(ns) => name
                .strip_prefix(ns)
                .and_then(|rest| rest.strip_prefix('%'))
                .unwrap_or(name),
            None => name,
        }
    }

    /// The client IP parsed, falling back to loopback if it was set to something unparsable.
    pub fn client_ip_addr(&self) -> IpAddr {
        self.client_ip
            .parse()
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }
}

/// The local IPv4 address that routes outward, or 127.0.0.1 when there is none (no network).
pub fn local_ip() -> IpAddr {
    let probe = || -> std::io::Result<IpAddr> {
        let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
        socket.connect(ROUTE_PROBE_ADDR)?;
        Ok(socket.local_addr()?.ip())
    };
    match probe() {
        Ok(ip) if !ip.is_loopback() && !ip.is_unspecified() => ip,
        _ => IpAddr::V4(Ipv4Addr::LOCALHOST),
    }
}

/// A nanosecond clock reading that differs from every earlier one of this process (Java's
/// `System.nanoTime()` in the instance name): wall-clock nanoseconds, bumped past the previous
/// reading when the clock is coarse or steps back.
fn unique_nanos() -> u64 {
    static LAST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let mut prev = LAST.load(std::sync::atomic::Ordering::Relaxed);
    loop {
        let next = now.max(prev.saturating_add(1));
        match LAST.compare_exchange_weak(
            prev,
            next,
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
        ) {
            Ok(_) => return next,
            Err(seen) => prev = seen,
        }
    }
}

/// A millisecond setting read from the environment under a Java system property name, e.g.
/// `rocketmq.client.rebalance.lockMaxLiveTime`, or its upper-case form with `_` for `.`
/// (`ROCKETMQ_CLIENT_REBALANCE_LOCKMAXLIVETIME`), which shells can export; the property name
/// wins when both are set. Unset gives `default_ms`; a value that is not a non-negative integer
/// is logged and also gives `default_ms`.
pub fn millis_from_env(property: &str, default_ms: u64) -> u64 {
    millis_from_lookup(property, default_ms, |name| std::env::var(name).ok())
}

/// [`millis_from_env`] over any variable lookup (`lookup(name)` is the variable's value).
pub fn millis_from_lookup(
    property: &str,
    default_ms: u64,
    lookup: impl Fn(&str) -> Option<String>,
) -> u64 {
    let upper = property.replace('.', "_").to_ascii_uppercase();
    let Some((name, raw)) = [property, upper.as_str()]
        .into_iter()
        .find_map(|name| lookup(name).map(|v| (name.to_owned(), v)))
    else {
        return default_ms;
    };
    match raw.trim().parse::<u64>() {
        Ok(ms) => ms,
        Err(e) => {
            tracing::warn!(variable = %name, value = %raw, default_ms, error = %e,
                "ignoring an unparsable millisecond setting");
            default_ms
        }
    }
}

fn rebalance_interval_from_env() -> Duration {
    std::env::var(REBALANCE_INTERVAL_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map_or(DEFAULT_REBALANCE_INTERVAL, Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_id_format() {
        let mut config = ClientConfig::new("127.0.0.1:9876");
        config.client_ip = "10.1.2.3".to_string();
        assert_eq!(config.build_client_id(), "10.1.2.3@DEFAULT");
        config.unit_name = Some("unitA".to_string());
        assert_eq!(config.build_client_id(), "10.1.2.3@DEFAULT@unitA");
        config.unit_name = Some(String::new());
        assert_eq!(config.build_client_id(), "10.1.2.3@DEFAULT");
    }

    #[test]
    fn instance_name_becomes_pid_and_nanos_only_when_default() {
        let mut config = ClientConfig::new("127.0.0.1:9876");
        config.change_instance_name_to_pid();
        let (pid, nanos) = config.instance_name.split_once('#').expect("pid#nanos");
        assert_eq!(pid, std::process::id().to_string());
        assert!(nanos.parse::<u64>().is_ok(), "{}", config.instance_name);
        let mut other = ClientConfig::new("127.0.0.1:9876");
        other.change_instance_name_to_pid();
        assert_ne!(other.instance_name, config.instance_name);
        let mut named = ClientConfig::new("127.0.0.1:9876");
        named.instance_name = "mine".to_string();
        named.change_instance_name_to_pid();
        assert_eq!(named.instance_name, "mine");
    }

    #[test]
    fn millis_from_env_reads_both_spellings_and_falls_back_on_garbage() {
        const PROP: &str = "rocketmq.client.rebalance.lockMaxLiveTime";
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(millis_from_lookup(PROP, 30_000, env(&[])), 30_000);
        assert_eq!(
            millis_from_lookup(PROP, 30_000, env(&[(PROP, " 250 ")])),
            250
        );
        assert_eq!(
            millis_from_lookup(
                PROP,
                30_000,
                env(&[("ROCKETMQ_CLIENT_REBALANCE_LOCKMAXLIVETIME", "42")])
            ),
            42
        );
        assert_eq!(
            millis_from_lookup(
                PROP,
                30_000,
                env(&[
                    (PROP, "7"),
                    ("ROCKETMQ_CLIENT_REBALANCE_LOCKMAXLIVETIME", "42")
                ])
            ),
            7
        );
        assert_eq!(
            millis_from_lookup(PROP, 30_000, env(&[(PROP, "soon")])),
            30_000
        );
        assert_eq!(
            millis_from_lookup(PROP, 30_000, env(&[(PROP, "-5")])),
            30_000
        );
        assert_eq!(millis_from_env("comet.test.neverSet.anywhere", 9), 9);
    }

    #[test]
    fn namesrv_list_is_split_and_trimmed() {
        let config = ClientConfig::new(" a:1 ;; b:2;");
        assert_eq!(config.namesrv_addrs(), vec!["a:1", "b:2"]);
    }

    #[test]
    fn defaults_match_the_java_client() {
        let config = ClientConfig::default();
        assert_eq!(config.poll_name_server_interval, Duration::from_secs(30));
        assert_eq!(config.heartbeat_broker_interval, Duration::from_secs(30));
        assert_eq!(
            config.persist_consumer_offset_interval,
            Duration::from_secs(5)
        );
        assert_eq!(config.mq_client_api_timeout, Duration::from_secs(3));
        assert_eq!(config.serialize_type, SerializeType::Json);
        assert_eq!(config.instance_name, DEFAULT_INSTANCE_NAME);
        assert!(config.client_ip.parse::<IpAddr>().is_ok());
    }

    #[test]
    fn namespace_prefix_is_applied_once() {
        let mut config = ClientConfig::new("x:1");
        assert_eq!(config.with_namespace("T"), "T");
        config.namespace = Some("ns".to_string());
        assert_eq!(config.with_namespace("T"), "ns%T");
        assert_eq!(config.with_namespace("ns%T"), "ns%T");
        assert_eq!(config.without_namespace("ns%T"), "T");
        assert_eq!(config.without_namespace("other%T"), "other%T");
    }

    #[test]
    fn namespaced_borrows_unless_it_adds_the_prefix() {
        let mut config = ClientConfig::new("x:1");
        assert!(matches!(config.namespaced("T"), Cow::Borrowed("T")));
        config.namespace = Some(String::new());
        assert!(matches!(config.namespaced("T"), Cow::Borrowed("T")));
        config.namespace = Some("ns".to_string());
        assert!(matches!(config.namespaced("ns%T"), Cow::Borrowed("ns%T")));
        assert_eq!(config.namespaced("T"), "ns%T");
        assert!(matches!(config.namespaced("nsT"), Cow::Owned(ref t) if t == "ns%nsT"));
    }
}
