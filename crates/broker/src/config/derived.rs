//! Settings derived from the configuration: the listener's, the store's, the address the
//! broker announces.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use comet_store::MessageStoreConfig;

use super::{
    ALWAYS_BLACK_LISTED, BrokerConfig, BrokerRole, DEFAULT_ACL_FILE, FAST_PORT_OFFSET,
    HA_PORT_OFFSET, MAX_REGISTER_NAME_SERVER_PERIOD_MS, MIN_REGISTER_NAME_SERVER_PERIOD_MS,
    ROCKETMQ_HOME_ENV, SAVED_CONFIG_FILE,
};

impl BrokerConfig {
    /// The file runtime changes are written to: `brokerConfigPath`, else
    /// `<storePathRootDir>/config/broker.properties`.
    pub fn config_file_path(&self) -> PathBuf {
        self.broker_config_path
            .clone()
            .unwrap_or_else(|| self.store_path_root_dir.join(SAVED_CONFIG_FILE))
    }

    /// Whether `updateBrokerConfig` refuses `key`: one of the keys always refused, or listed in
    /// `configBlackList`.
    pub fn is_black_listed(&self, key: &str) -> bool {
        ALWAYS_BLACK_LISTED.contains(&key)
            || self
                .config_black_list
                .split(';')
                .map(str::trim)
                .any(|listed| !listed.is_empty() && listed == key)
    }

    /// The `plain_acl.yml` in use: `aclFile`, else `$ROCKETMQ_HOME/conf/plain_acl.yml`, else
    /// `conf/plain_acl.yml` under the working directory.
    pub fn acl_file_path(&self) -> PathBuf {
        if let Some(path) = &self.acl_file {
            return path.clone();
        }
        match std::env::var_os(ROCKETMQ_HOME_ENV) {
            Some(home) => PathBuf::from(home).join(DEFAULT_ACL_FILE),
            None => PathBuf::from(DEFAULT_ACL_FILE),
        }
    }

    /// The TLS settings of the listener, `None` when `tlsServerMode` is disabled.
    pub fn tls_config(&self) -> Option<comet_remoting::TlsConfig> {
        match (
            self.tls_server_mode,
            &self.tls_server_cert_path,
            &self.tls_server_key_path,
        ) {
            (comet_remoting::TlsMode::Disabled, _, _) => None,
            (mode, Some(cert), Some(key)) => Some(comet_remoting::TlsConfig::new(mode, cert, key)),
            _ => None,
        }
    }

    /// The idle timeout of the listeners, `None` when `serverChannelMaxIdleTimeSeconds` is 0.
    pub fn server_idle_timeout(&self) -> Option<Duration> {
        (self.server_channel_max_idle_time_seconds > 0)
            .then(|| Duration::from_secs(self.server_channel_max_idle_time_seconds))
    }

    /// `rocketmq.broker.rebalance.lockMaxLiveTime` as a duration.
    pub fn rebalance_lock_max_live(&self) -> Duration {
        Duration::from_millis(self.rebalance_lock_max_live_time_ms)
    }

    /// The listener settings: address, TLS, idle timeout, write-buffer bound.
    pub fn server_config(&self) -> comet_remoting::ServerConfig {
        comet_remoting::ServerConfig {
            tls: self.tls_config(),
            idle_timeout: self.server_idle_timeout(),
            write_buffer_high_water_mark: self.write_buffer_high_water_mark,
            ..comet_remoting::ServerConfig::new(self.listen_addr().to_string())
        }
    }

    /// The store settings derived from this configuration.
    pub fn to_store_config(&self) -> MessageStoreConfig {
        MessageStoreConfig {
            store_path_root_dir: self.store_path_root_dir.clone(),
            store_path_commit_log: self.store_path_commit_log.clone(),
            mapped_file_size_commit_log: self.mapped_file_size_commit_log,
            consume_queue_entries_per_file: (self.mapped_file_size_consume_queue
                / comet_store::consume_queue::CQ_STORE_UNIT_SIZE)
                .max(1),
            flush_disk_type: self.flush_disk_type,
            flush_interval_commit_log: Duration::from_millis(self.flush_interval_commit_log_ms),
            flush_commit_log_timed: self.flush_commit_log_timed,
            flush_commit_log_least_pages: self.flush_commit_log_least_pages,
            flush_interval_consume_queue: Duration::from_millis(
                self.flush_interval_consume_queue_ms,
            ),
            sync_flush_timeout: Duration::from_millis(self.sync_flush_timeout_ms),
            max_message_size: self.max_message_size,
            check_crc_on_recover: self.check_crc_on_recover,
            message_index_enable: self.message_index_enable,
            max_hash_slot_num: self.max_hash_slot_num,
            max_index_num: self.max_index_num,
            file_reserved_time_hours: self.file_reserved_time_hours,
            delete_when: self.delete_when.clone(),
            disk_max_used_space_ratio: self.disk_max_used_space_ratio,
            disk_space_clean_forcibly_ratio: self.disk_space_clean_forcibly_ratio,
            disk_space_warning_level_ratio: self.disk_space_warning_level_ratio,
            clean_resource_interval: Duration::from_millis(self.clean_resource_interval_ms),
            access_message_in_memory_max_ratio: self.access_message_in_memory_max_ratio,
            max_transfer_bytes_on_message_in_memory: self.max_transfer_bytes_on_message_in_memory,
            max_transfer_count_on_message_in_memory: self.max_transfer_count_on_message_in_memory,
            max_transfer_bytes_on_message_in_disk: self.max_transfer_bytes_on_message_in_disk,
            max_transfer_count_on_message_in_disk: self.max_transfer_count_on_message_in_disk,
            message_delay_level: self.message_delay_level.clone(),
            mapped_pages_release_bytes: self.mapped_pages_release_bytes,
            commit_log_page_cache_bytes: self.commit_log_page_cache_bytes,
            commit_log_zero_ahead_bytes: self.commit_log_zero_ahead_bytes,
            ..MessageStoreConfig::default()
        }
    }

    /// Delay per level in milliseconds (index 0 = level 1); empty if the setting is invalid
    /// (validation rejects that).
    pub fn delay_levels_millis(&self) -> Vec<i64> {
        self.to_store_config()
            .delay_levels_millis()
            .unwrap_or_default()
    }

    /// Whether this broker is a slave.
    pub fn is_slave(&self) -> bool {
        self.broker_role == BrokerRole::Slave
    }

    /// The id the broker registers with: 0 for a master whatever `brokerId` says (as Apache
    /// does), `brokerId` for a slave.
    pub fn effective_broker_id(&self) -> i64 {
        if self.is_slave() { self.broker_id } else { 0 }
    }

    /// Brokers that must hold a message before its send is answered: `inSyncReplicas` for a
    /// `SYNC_MASTER`, else 1 (the broker itself).
    pub fn required_copies(&self) -> usize {
        match self.broker_role {
            BrokerRole::SyncMaster => usize::try_from(self.in_sync_replicas).unwrap_or(1).max(1),
            _ => 1,
        }
    }

    /// The address the HA listener binds: `haListenPort`, else `listenPort + 1`, else (with
    /// `listenPort` 0) an ephemeral port.
    pub fn ha_listen_addr(&self) -> SocketAddr {
        let port = match (self.ha_listen_port, self.listen_port) {
            (0, 0) => 0,
            (0, listen) => listen.saturating_add(HA_PORT_OFFSET),
            (ha, _) => ha,
        };
        SocketAddr::new(self.bind_address, port)
    }

    /// The address of the fast (VIP) listener, `listenPort - 2`, if `listenPort` leaves room
    /// for one (not with an ephemeral `listenPort`).
    pub fn fast_listen_addr(&self) -> Option<SocketAddr> {
        (self.listen_port > FAST_PORT_OFFSET)
            .then(|| SocketAddr::new(self.bind_address, self.listen_port - FAST_PORT_OFFSET))
    }

    /// The address the main listener binds.
    pub fn listen_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.listen_port)
    }

    /// `registerNameServerPeriod` clamped to RocketMQ's 10–60 s.
    pub fn register_period(&self) -> Duration {
        Duration::from_millis(self.register_name_server_period_ms.clamp(
            MIN_REGISTER_NAME_SERVER_PERIOD_MS,
            MAX_REGISTER_NAME_SERVER_PERIOD_MS,
        ))
    }

    /// `registerBrokerTimeoutMills`: how long one name server has to answer a registration.
    pub fn register_broker_timeout(&self) -> Duration {
        Duration::from_millis(self.register_broker_timeout_ms)
    }

    /// The IP clients reach this broker at: `brokerIP1`, else the bind IP if it is specific,
    /// else the host's first non-loopback IPv4, else loopback.
    pub fn resolve_broker_ip(&self) -> IpAddr {
        if let Some(ip) = self.broker_ip1 {
            return ip;
        }
        if !self.bind_address.is_unspecified() {
            return self.bind_address;
        }
        first_non_loopback_ipv4()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }
}

/// The first IPv4 address of an up, non-loopback interface, in the order the OS lists them.
#[allow(unsafe_code)]
pub fn first_non_loopback_ipv4() -> Option<Ipv4Addr> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cursor = head;
    while !cursor.is_null() {
        // SAFETY: `cursor` is a node of the list returned by getifaddrs, not yet freed.
        let entry = unsafe { &*cursor };
        cursor = entry.ifa_next;
        let up = entry.ifa_flags & (libc::IFF_UP as libc::c_uint) != 0;
        let loopback = entry.ifa_flags & (libc::IFF_LOOPBACK as libc::c_uint) != 0;
        if entry.ifa_addr.is_null() || !up || loopback {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points to a sockaddr of the family it announces.
        let family = i32::from(unsafe { (*entry.ifa_addr).sa_family });
        if family != libc::AF_INET {
            continue;
        }
        // SAFETY: AF_INET addresses are sockaddr_in.
        let sin = unsafe { &*(entry.ifa_addr as *const libc::sockaddr_in) };
        let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
        if !ip.is_loopback() && !ip.is_unspecified() {
            found = Some(ip);
            break;
        }
    }
    // SAFETY: `head` came from a successful getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    found
}

/// Labels every metric carries already; `metricsLabel` may not set them.
pub const RESERVED_METRIC_LABELS: &[&str] = &["cluster", "node_type", "node_id"];

impl BrokerConfig {
    /// The `metricsLabel` pairs, checked: each `key:value`, the key a Prometheus label name
    /// (`[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`) that no other pair and no built-in
    /// label uses.
    pub fn metrics_labels(&self) -> Result<Vec<(String, String)>, String> {
        let mut labels: Vec<(String, String)> = Vec::new();
        for pair in self
            .metrics_label
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let Some((key, value)) = pair.split_once(':') else {
                return Err(format!("{pair:?} is not key:value"));
            };
            let key = key.trim();
            let mut chars = key.chars();
            let first_ok = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
            if !first_ok
                || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
                || key.starts_with("__")
            {
                return Err(format!("{key:?} is not a Prometheus label name"));
            }
            if RESERVED_METRIC_LABELS.contains(&key) || labels.iter().any(|(k, _)| k == key) {
                return Err(format!("label {key:?} is set twice"));
            }
            labels.push((key.to_owned(), value.trim().to_owned()));
        }
        Ok(labels)
    }

    /// Whether the gRPC endpoint is served: `enableGrpcServer` (under `aclEnable` it checks the
    /// credentials of every call, see the `comet-grpc` crate's ACL check).
    pub fn serves_grpc(&self) -> bool {
        self.enable_grpc_server
    }

    /// Where the gRPC endpoint listens: the listener's bind address and `grpcServerPort`.
    pub fn grpc_listen_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.grpc_server_port)
    }

    /// Where the metrics endpoint listens.
    pub fn metrics_listen_addr(&self) -> SocketAddr {
        let ip = self
            .metrics_prom_exporter_host
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        SocketAddr::new(ip, self.metrics_prom_exporter_port)
    }
}
