//! `BrokerConfig`: every broker setting, its `broker.conf` key, default and validation in one place.
//!
//! Operators move between Apache RocketMQ and Comet with their `broker.conf` in hand, so the keys
//! are RocketMQ's (`brokerClusterName`, `listenPort`, `flushDiskType`, ...) and so are the
//! defaults. The file format is Java's `.properties`: `key=value` (or `key: value`, or
//! `key value`), `#`/`!` comment lines, surrounding whitespace trimmed, a trailing backslash
//! continues a line. A key this broker does not know is not an error — real `broker.conf` files
//! carry many settings Comet has no use for — but it is reported back by name so the binary can
//! log it: a typo must never silently fall back to a default.
//!
//! Every field is declared once in the `broker_config!` table below; parsing, printing
//! (`--print-config`) and the list of known keys are generated from it, so they cannot drift
//! apart.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use comet_store::{FlushDiskType, MessageStoreConfig};
use thiserror::Error;

/// Default RocketMQ cluster name.
pub const DEFAULT_CLUSTER_NAME: &str = "DefaultCluster";
/// Default broker name.
pub const DEFAULT_BROKER_NAME: &str = "broker-a";
/// Default main listener port.
pub const DEFAULT_LISTEN_PORT: u16 = 10911;
/// Offset of the HA port from the main port (10911 → 10912).
pub const HA_PORT_OFFSET: u16 = 1;
/// Default `defaultTopicQueueNums` of a broker (§8.4).
pub const DEFAULT_TOPIC_QUEUE_NUMS: i32 = 8;
/// Most queues one topic may have: a bound on what a single create request can make the broker
/// allocate (RocketMQ's own largest system topic, BenchmarkTest, has 1024).
pub const MAX_QUEUE_NUMS: i32 = 1024;
/// Registration period bounds: RocketMQ clamps `registerNameServerPeriod` to 10–60 s.
pub const MIN_REGISTER_NAME_SERVER_PERIOD_MS: u64 = 10_000;
pub const MAX_REGISTER_NAME_SERVER_PERIOD_MS: u64 = 60_000;
/// Shortest accepted period for timers driven by config (offset flush, short polling): a tighter
/// loop only burns CPU.
pub const MIN_TIMER_PERIOD_MS: u64 = 10;
/// Longest `broker.conf` line accepted after joining continuations (a bound on hostile input).
pub const MAX_CONFIG_LINE_LEN: usize = 64 * 1024;

/// A configuration value is unusable. Every variant names the key.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    #[error("config key `{key}` has malformed value {value:?}: expected {expected}")]
    Malformed {
        key: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("config key `{key}`: {reason}")]
    Invalid { key: &'static str, reason: String },
    #[error("config line {line}: {reason}")]
    Syntax { line: usize, reason: String },
    #[error("cannot read config file {path}: {reason}")]
    Read { path: PathBuf, reason: String },
}

/// A scalar that can appear as a `broker.conf` value.
pub trait ConfigValue: Sized {
    /// What the value must look like, for error messages.
    const EXPECTED: &'static str;
    fn parse_value(raw: &str) -> Option<Self>;
    fn render(&self) -> String;
}

impl ConfigValue for String {
    const EXPECTED: &'static str = "a string";
    fn parse_value(raw: &str) -> Option<Self> {
        Some(raw.to_owned())
    }
    fn render(&self) -> String {
        self.clone()
    }
}

impl ConfigValue for bool {
    const EXPECTED: &'static str = "true or false";
    fn parse_value(raw: &str) -> Option<Self> {
        if raw.eq_ignore_ascii_case("true") {
            Some(true)
        } else if raw.eq_ignore_ascii_case("false") {
            Some(false)
        } else {
            None
        }
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

macro_rules! numeric_config_value {
    ($($ty:ty => $what:literal),*) => {
        $(impl ConfigValue for $ty {
            const EXPECTED: &'static str = $what;
            fn parse_value(raw: &str) -> Option<Self> {
                raw.parse().ok()
            }
            fn render(&self) -> String {
                self.to_string()
            }
        })*
    };
}

numeric_config_value!(
    i32 => "a 32-bit integer",
    i64 => "a 64-bit integer",
    u16 => "a port number (0-65535)",
    u32 => "a non-negative integer",
    u64 => "a non-negative integer",
    usize => "a non-negative integer"
);

impl ConfigValue for PathBuf {
    const EXPECTED: &'static str = "a path";
    fn parse_value(raw: &str) -> Option<Self> {
        (!raw.is_empty()).then(|| PathBuf::from(raw))
    }
    fn render(&self) -> String {
        self.display().to_string()
    }
}

impl ConfigValue for Option<PathBuf> {
    const EXPECTED: &'static str = "a path (or empty)";
    fn parse_value(raw: &str) -> Option<Self> {
        Some((!raw.is_empty()).then(|| PathBuf::from(raw)))
    }
    fn render(&self) -> String {
        self.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }
}

impl ConfigValue for Option<IpAddr> {
    const EXPECTED: &'static str = "an IP address (or empty)";
    fn parse_value(raw: &str) -> Option<Self> {
        if raw.is_empty() {
            return Some(None);
        }
        raw.parse().ok().map(Some)
    }
    fn render(&self) -> String {
        self.map(|ip| ip.to_string()).unwrap_or_default()
    }
}

impl ConfigValue for IpAddr {
    const EXPECTED: &'static str = "an IP address";
    fn parse_value(raw: &str) -> Option<Self> {
        raw.parse().ok()
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

/// `namesrvAddr`: `host:port` entries separated by `;` (empty entries ignored).
impl ConfigValue for Vec<String> {
    const EXPECTED: &'static str = "a ;-separated list of host:port";
    fn parse_value(raw: &str) -> Option<Self> {
        Some(
            raw.split(';')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        )
    }
    fn render(&self) -> String {
        self.join(";")
    }
}

impl ConfigValue for FlushDiskType {
    const EXPECTED: &'static str = "ASYNC_FLUSH or SYNC_FLUSH";
    fn parse_value(raw: &str) -> Option<Self> {
        match raw {
            "ASYNC_FLUSH" => Some(FlushDiskType::AsyncFlush),
            "SYNC_FLUSH" => Some(FlushDiskType::SyncFlush),
            _ => None,
        }
    }
    fn render(&self) -> String {
        match self {
            FlushDiskType::AsyncFlush => "ASYNC_FLUSH",
            FlushDiskType::SyncFlush => "SYNC_FLUSH",
        }
        .to_owned()
    }
}

/// `brokerRole`. Comet brokers are masters; a slave role is refused by validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BrokerRole {
    #[default]
    AsyncMaster,
    SyncMaster,
    Slave,
}

impl ConfigValue for BrokerRole {
    const EXPECTED: &'static str = "ASYNC_MASTER, SYNC_MASTER or SLAVE";
    fn parse_value(raw: &str) -> Option<Self> {
        match raw {
            "ASYNC_MASTER" => Some(BrokerRole::AsyncMaster),
            "SYNC_MASTER" => Some(BrokerRole::SyncMaster),
            "SLAVE" => Some(BrokerRole::Slave),
            _ => None,
        }
    }
    fn render(&self) -> String {
        match self {
            BrokerRole::AsyncMaster => "ASYNC_MASTER",
            BrokerRole::SyncMaster => "SYNC_MASTER",
            BrokerRole::Slave => "SLAVE",
        }
        .to_owned()
    }
}

fn default_store_root() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
        .join("store")
}

macro_rules! broker_config {
    (
        $( $(#[$doc:meta])* $field:ident : $ty:ty = $default:expr => $key:literal, )*
    ) => {
        /// The broker's settings (see the module docs for the file format).
        #[derive(Debug, Clone, PartialEq)]
        pub struct BrokerConfig {
            $( $(#[$doc])* pub $field: $ty, )*
        }

        impl Default for BrokerConfig {
            fn default() -> Self {
                BrokerConfig { $( $field: $default, )* }
            }
        }

        impl BrokerConfig {
            /// Every `broker.conf` key this broker understands, in declaration order.
            pub const KEYS: &'static [&'static str] = &[$($key,)*];

            /// Sets `key` from its text. `Ok(false)` means the key is unknown (nothing changed).
            pub fn set(&mut self, key: &str, raw: &str) -> Result<bool, ConfigError> {
                match key {
                    $($key => {
                        self.$field = <$ty as ConfigValue>::parse_value(raw).ok_or_else(|| {
                            ConfigError::Malformed {
                                key: $key,
                                value: raw.to_owned(),
                                expected: <$ty as ConfigValue>::EXPECTED,
                            }
                        })?;
                        Ok(true)
                    })*
                    _ => Ok(false),
                }
            }

            /// `(key, value text)` of every setting, in declaration order.
            pub fn entries(&self) -> Vec<(&'static str, String)> {
                vec![$(($key, ConfigValue::render(&self.$field)),)*]
            }
        }
    };
}

broker_config! {
    /// `brokerClusterName`.
    broker_cluster_name: String = DEFAULT_CLUSTER_NAME.to_owned() => "brokerClusterName",
    /// `brokerName`: the name routes and message queues carry.
    broker_name: String = DEFAULT_BROKER_NAME.to_owned() => "brokerName",
    /// `brokerId`: 0 = master (the only role Comet runs).
    broker_id: i64 = 0 => "brokerId",
    /// `brokerRole`.
    broker_role: BrokerRole = BrokerRole::AsyncMaster => "brokerRole",
    /// `bindAddress`: IP the main listener binds (`0.0.0.0` = every interface).
    bind_address: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED) => "bindAddress",
    /// `listenPort`: 0 picks an ephemeral port (tests).
    listen_port: u16 = DEFAULT_LISTEN_PORT => "listenPort",
    /// `haListenPort`: announced as `haServerAddr` (Comet runs no HA service).
    ha_listen_port: u16 = DEFAULT_LISTEN_PORT + HA_PORT_OFFSET => "haListenPort",
    /// `namesrvAddr`: name servers to register with, `;`-separated.
    namesrv_addr: Vec<String> = Vec::new() => "namesrvAddr",
    /// `brokerIP1`: the address clients reach this broker at (routes, message ids). Empty: the
    /// bind IP if specific, else the first non-loopback IPv4 of the host.
    broker_ip1: Option<IpAddr> = None => "brokerIP1",
    /// `storePathRootDir`.
    store_path_root_dir: PathBuf = default_store_root() => "storePathRootDir",
    /// `storePathCommitLog`: empty means `<storePathRootDir>/commitlog`.
    store_path_commit_log: Option<PathBuf> = None => "storePathCommitLog",
    /// `flushDiskType`.
    flush_disk_type: FlushDiskType = FlushDiskType::AsyncFlush => "flushDiskType",
    /// `mappedFileSizeCommitLog`: bytes per CommitLog segment.
    mapped_file_size_commit_log: usize =
        comet_store::config::DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG => "mappedFileSizeCommitLog",
    /// `mappedFileSizeConsumeQueue`: bytes per ConsumeQueue file (20 per entry).
    mapped_file_size_consume_queue: usize =
        comet_store::config::DEFAULT_CONSUME_QUEUE_ENTRIES_PER_FILE * comet_store::consume_queue::CQ_STORE_UNIT_SIZE
        => "mappedFileSizeConsumeQueue",
    /// `flushIntervalCommitLog` (ms).
    flush_interval_commit_log: u64 = 500 => "flushIntervalCommitLog",
    /// `flushCommitLogTimed`: under ASYNC_FLUSH, flush the CommitLog only every
    /// `flushIntervalCommitLog` instead of whenever `flushCommitLogLeastPages` are dirty.
    flush_commit_log_timed: bool = true => "flushCommitLogTimed",
    /// `flushCommitLogLeastPages`: dirty 4 KiB pages an ASYNC_FLUSH flush waits for.
    flush_commit_log_least_pages: usize = 4 => "flushCommitLogLeastPages",
    /// `flushIntervalConsumeQueue` (ms).
    flush_interval_consume_queue: u64 = 1000 => "flushIntervalConsumeQueue",
    /// `syncFlushTimeout` (ms): a SYNC_FLUSH send waiting longer answers FLUSH_DISK_TIMEOUT.
    sync_flush_timeout: u64 = 5000 => "syncFlushTimeout",
    /// `maxMessageSize`: largest message body (or batch body) accepted.
    max_message_size: usize = comet_protocol::limits::MAX_MESSAGE_SIZE => "maxMessageSize",
    /// `checkCRCOnRecover`.
    check_crc_on_recover: bool = true => "checkCRCOnRecover",
    /// `messageIndexEnable`.
    message_index_enable: bool = true => "messageIndexEnable",
    /// `mappedPagesReleaseBytes` (Comet's own): every this many bytes read from the CommitLog,
    /// unmap the store's file pages behind the readers from the process, so the resident set does
    /// not grow with the data stored; 0 keeps them mapped as RocketMQ does.
    mapped_pages_release_bytes: u64 =
        comet_store::page_release::DEFAULT_MAPPED_PAGES_RELEASE_BYTES => "mappedPagesReleaseBytes",
    /// `commitLogPageCacheBytes` (Comet's own): flushed CommitLog pages more than this many bytes
    /// behind the end are dropped from the page cache, so appends reuse recently freed pages
    /// instead of ones the host must back first; 0 leaves the page cache to the kernel.
    commit_log_page_cache_bytes: u64 =
        comet_store::page_release::DEFAULT_COMMIT_LOG_PAGE_CACHE_BYTES => "commitLogPageCacheBytes",
    /// `commitLogZeroAheadBytes` (Comet's own): bytes after the CommitLog's append position kept
    /// prepared: zeroed under SYNC_FLUSH, so a group commit's msync finds its blocks allocated
    /// instead of also writing the allocation's metadata; allocated (`fallocate`) under
    /// ASYNC_FLUSH, so an append never waits for the timed flush's block allocation. 0 leaves
    /// segments sparse until written.
    commit_log_zero_ahead_bytes: u64 =
        comet_store::zero_ahead::DEFAULT_COMMIT_LOG_ZERO_AHEAD_BYTES => "commitLogZeroAheadBytes",
    /// `maxHashSlotNum` of one index file.
    max_hash_slot_num: usize = 5_000_000 => "maxHashSlotNum",
    /// `maxIndexNum` of one index file.
    max_index_num: usize = 20_000_000 => "maxIndexNum",
    /// `fileReservedTime` (hours).
    file_reserved_time: u64 = 72 => "fileReservedTime",
    /// `deleteWhen`: hours of the day (`04`, `04;05`) when expired files are deleted.
    delete_when: String = "04".to_owned() => "deleteWhen",
    /// `diskMaxUsedSpaceRatio` (%).
    disk_max_used_space_ratio: u32 = 75 => "diskMaxUsedSpaceRatio",
    /// `diskSpaceCleanForciblyRatio` (%).
    disk_space_clean_forcibly_ratio: u32 = 85 => "diskSpaceCleanForciblyRatio",
    /// `diskSpaceWarningLevelRatio` (%): above it sends answer SERVICE_NOT_AVAILABLE.
    disk_space_warning_level_ratio: u32 = 90 => "diskSpaceWarningLevelRatio",
    /// `cleanResourceInterval` (ms).
    clean_resource_interval: u64 = 10_000 => "cleanResourceInterval",
    /// `accessMessageInMemoryMaxRatio` (%).
    access_message_in_memory_max_ratio: u32 = 40 => "accessMessageInMemoryMaxRatio",
    /// `maxTransferBytesOnMessageInMemory`.
    max_transfer_bytes_on_message_in_memory: usize = 256 * 1024 => "maxTransferBytesOnMessageInMemory",
    /// `maxTransferCountOnMessageInMemory`.
    max_transfer_count_on_message_in_memory: usize = 32 => "maxTransferCountOnMessageInMemory",
    /// `maxTransferBytesOnMessageInDisk`.
    max_transfer_bytes_on_message_in_disk: usize = 64 * 1024 => "maxTransferBytesOnMessageInDisk",
    /// `maxTransferCountOnMessageInDisk`.
    max_transfer_count_on_message_in_disk: usize = 8 => "maxTransferCountOnMessageInDisk",
    /// `messageDelayLevel`: delay per level (1-based), units s/m/h/d.
    message_delay_level: String =
        comet_store::config::DEFAULT_MESSAGE_DELAY_LEVEL.to_owned() => "messageDelayLevel",
    /// `autoCreateTopicEnable`: sends to unknown topics create them from TBW102.
    auto_create_topic_enable: bool = true => "autoCreateTopicEnable",
    /// `autoCreateSubscriptionGroup`: groups are created on first use.
    auto_create_subscription_group: bool = true => "autoCreateSubscriptionGroup",
    /// `defaultTopicQueueNums`: queues of TBW102, and so the cap of auto-created topics.
    default_topic_queue_nums: i32 = DEFAULT_TOPIC_QUEUE_NUMS => "defaultTopicQueueNums",
    /// `clusterTopicEnable`: the cluster-name topic is readable/writable.
    cluster_topic_enable: bool = true => "clusterTopicEnable",
    /// `brokerTopicEnable`: the broker-name topic is readable/writable.
    broker_topic_enable: bool = true => "brokerTopicEnable",
    /// `traceTopicEnable`: create the message-trace topic.
    trace_topic_enable: bool = false => "traceTopicEnable",
    /// `msgTraceTopicName`.
    msg_trace_topic_name: String = "RMQ_SYS_TRACE_TOPIC".to_owned() => "msgTraceTopicName",
    /// `brokerPermission`: ANDed into every topic's perm at registration (§8.2).
    broker_permission: i32 = comet_protocol::body::perm::PERM_READ_WRITE => "brokerPermission",
    /// `longPollingEnable`.
    long_polling_enable: bool = true => "longPollingEnable",
    /// `shortPollingTimeMills`: hold time of a pull when long polling is off.
    short_polling_time_mills: u64 = 1000 => "shortPollingTimeMills",
    /// `registerNameServerPeriod` (ms), clamped to 10–60 s.
    register_name_server_period: u64 = 30_000 => "registerNameServerPeriod",
    /// `registerBrokerTimeoutMills`.
    register_broker_timeout_mills: u64 = 24_000 => "registerBrokerTimeoutMills",
    /// `flushConsumerOffsetInterval` (ms).
    flush_consumer_offset_interval: u64 = 5000 => "flushConsumerOffsetInterval",
    /// `channelExpiredTimeout` (ms): clients silent for this long are dropped.
    channel_expired_timeout: u64 = 120_000 => "channelExpiredTimeout",
    /// How long an orderly consumer's queue lock lives without a refresh before another member
    /// of its group may take the queue (ms). Apache reads it from the JVM property of the same
    /// name. Clients refresh their locks every 20 s: a shorter value lets a queue change hands
    /// between two refreshes of a live consumer.
    rebalance_lock_max_live_time: u64 = 60_000 => "rocketmq.broker.rebalance.lockMaxLiveTime",
    /// `serverChannelMaxIdleTimeSeconds`: connections (broker and, under `comet serve`, name
    /// server) that send nothing for this long are closed; 0 never closes them.
    server_channel_max_idle_time_seconds: u64 =
        comet_remoting::limits::DEFAULT_IDLE_TIMEOUT.as_secs() => "serverChannelMaxIdleTimeSeconds",
    /// `writeBufferHighWaterMark` (bytes): unsent responses of one connection above which it
    /// stops reading requests and broker-to-client calls are refused.
    write_buffer_high_water_mark: usize =
        comet_remoting::limits::DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK => "writeBufferHighWaterMark",
    /// `regionId`: the MSG_REGION announced in send responses.
    region_id: String = comet_protocol::headers::DEFAULT_MSG_REGION.to_owned() => "regionId",
    /// `traceOn`: the TRACE_ON announced in send responses.
    trace_on: bool = true => "traceOn",
    /// `aclEnable`: check every request against `plain_acl.yml` (ACL 1.0, fact sheet §9).
    acl_enable: bool = false => "aclEnable",
    /// `aclFile`: the `plain_acl.yml` to use; empty means `$ROCKETMQ_HOME/conf/plain_acl.yml`
    /// (RocketMQ's `rocketmq.acl.plain.file`). Reloaded when it changes.
    acl_file: Option<PathBuf> = None => "aclFile",
    /// `tlsServerMode`: `disabled`, `permissive` (TLS and plaintext on the listen port) or
    /// `enforcing` (TLS only) — RocketMQ's `tls.server.mode`.
    tls_server_mode: comet_remoting::TlsMode = comet_remoting::TlsMode::Disabled => "tlsServerMode",
    /// `tlsServerCertPath`: PEM certificate chain (`tls.server.certPath`).
    tls_server_cert_path: Option<PathBuf> = None => "tlsServerCertPath",
    /// `tlsServerKeyPath`: PEM private key (`tls.server.keyPath`).
    tls_server_key_path: Option<PathBuf> = None => "tlsServerKeyPath",
    /// `transactionTimeOut` (ms): a half message younger than this is not checked yet.
    transaction_time_out: u64 = 6_000 => "transactionTimeOut",
    /// `transactionCheckInterval` (ms): period of the transaction check service.
    transaction_check_interval: u64 = 30_000 => "transactionCheckInterval",
    /// `transactionCheckMax`: checks of one half message before it is discarded.
    transaction_check_max: i32 = 15 => "transactionCheckMax",
}

impl ConfigValue for comet_remoting::TlsMode {
    const EXPECTED: &'static str = "disabled, permissive or enforcing";
    fn parse_value(raw: &str) -> Option<Self> {
        comet_remoting::TlsMode::parse(raw)
    }
    fn render(&self) -> String {
        self.name().to_owned()
    }
}

/// Environment variable naming RocketMQ's home; the default ACL file lives under it.
pub const ROCKETMQ_HOME_ENV: &str = "ROCKETMQ_HOME";
/// The ACL file relative to RocketMQ's home (or to the working directory without one).
pub const DEFAULT_ACL_FILE: &str = "conf/plain_acl.yml";

/// Joins continuation lines and yields `(line number, logical line)` pairs.
fn logical_lines(text: &str) -> Result<Vec<(usize, String)>, ConfigError> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (idx, raw) in text.lines().enumerate() {
        let number = idx + 1;
        let line = raw.trim_start();
        let (start, mut acc) = match pending.take() {
            Some((start, acc)) => (start, acc),
            None => {
                if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                    continue;
                }
                (number, String::new())
            }
        };
        // A line ending in an odd number of backslashes continues on the next one.
        let trailing = line.chars().rev().take_while(|c| *c == '\\').count();
        let continues = trailing % 2 == 1;
        let content = if continues {
            line.get(..line.len() - 1).unwrap_or_default()
        } else {
            line
        };
        acc.push_str(content);
        if acc.len() > MAX_CONFIG_LINE_LEN {
            return Err(ConfigError::Syntax {
                line: start,
                reason: format!("line longer than {MAX_CONFIG_LINE_LEN} bytes"),
            });
        }
        if continues {
            pending = Some((start, acc));
        } else {
            out.push((start, acc));
        }
    }
    if let Some((start, acc)) = pending {
        out.push((start, acc));
    }
    Ok(out)
}

/// Splits a logical line at the first `=`, `:` or whitespace (Java's rule), trimming both sides.
fn split_key_value(line: &str) -> (&str, &str) {
    let line = line.trim();
    match line.find(['=', ':', ' ', '\t']) {
        Some(pos) => {
            let key = line.get(..pos).unwrap_or_default().trim();
            let mut rest = line.get(pos..).unwrap_or_default().trim_start();
            if let Some(stripped) = rest.strip_prefix(['=', ':']) {
                rest = stripped;
            }
            (key, rest.trim())
        }
        None => (line, ""),
    }
}

/// A parsed `broker.conf`: the configuration and the keys it did not understand.
#[derive(Debug, Clone)]
pub struct ParsedConfig {
    pub config: BrokerConfig,
    /// Keys of the file this broker ignores, in file order. The binary logs a warning for each.
    pub unknown_keys: Vec<String>,
}

impl BrokerConfig {
    /// Parses `broker.conf` text over the defaults and validates the result.
    pub fn parse(text: &str) -> Result<ParsedConfig, ConfigError> {
        let mut config = BrokerConfig::default();
        let unknown_keys = config.apply_text(text)?;
        config.validate()?;
        Ok(ParsedConfig {
            config,
            unknown_keys,
        })
    }

    /// Applies the keys of `broker.conf` text over `self` (no validation) and returns the keys it
    /// did not understand, in file order. Lets a caller layer a file over a non-default base.
    pub fn apply_text(&mut self, text: &str) -> Result<Vec<String>, ConfigError> {
        let mut unknown_keys = Vec::new();
        for (line, logical) in logical_lines(text)? {
            let (key, value) = split_key_value(&logical);
            if key.is_empty() {
                return Err(ConfigError::Syntax {
                    line,
                    reason: "missing key".to_owned(),
                });
            }
            if !self.set(key, value)? {
                unknown_keys.push(key.to_owned());
            }
        }
        Ok(unknown_keys)
    }

    /// Reads and parses a `broker.conf` file.
    pub fn load(path: &Path) -> Result<ParsedConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Self::parse(&text)
    }

    /// The configuration as `broker.conf` text (`--print-config`); parsing it gives `self` back.
    pub fn to_properties(&self) -> String {
        let mut out = String::new();
        for (key, value) in self.entries() {
            let _ = writeln!(out, "{key}={value}");
        }
        out
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
        Duration::from_millis(self.rebalance_lock_max_live_time)
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

    /// Checks every value the broker relies on; the error names the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, reason: String| Err(ConfigError::Invalid { key, reason });
        self.validate_remoting()?;
        if self.broker_cluster_name.trim().is_empty() {
            return invalid("brokerClusterName", "must not be empty".into());
        }
        if self.broker_name.trim().is_empty() {
            return invalid("brokerName", "must not be empty".into());
        }
        if self.broker_id != 0 || self.broker_role == BrokerRole::Slave {
            return invalid(
                "brokerId",
                format!(
                    "Comet runs master brokers only (brokerId 0, brokerRole ASYNC_MASTER/SYNC_MASTER); got brokerId {} role {}",
                    self.broker_id,
                    self.broker_role.render()
                ),
            );
        }
        if !(1..=MAX_QUEUE_NUMS).contains(&self.default_topic_queue_nums) {
            return invalid(
                "defaultTopicQueueNums",
                format!("must be within 1..={MAX_QUEUE_NUMS}"),
            );
        }
        if !(0..=7).contains(&self.broker_permission) {
            return invalid(
                "brokerPermission",
                "must be a combination of READ(4), WRITE(2), INHERIT(1)".into(),
            );
        }
        if self.max_message_size == 0
            || self.max_message_size > comet_protocol::limits::MAX_FRAME_LEN
        {
            return invalid(
                "maxMessageSize",
                format!(
                    "must be within 1..={} (the frame limit)",
                    comet_protocol::limits::MAX_FRAME_LEN
                ),
            );
        }
        for (key, value) in [
            ("shortPollingTimeMills", self.short_polling_time_mills),
            (
                "flushConsumerOffsetInterval",
                self.flush_consumer_offset_interval,
            ),
            ("flushIntervalCommitLog", self.flush_interval_commit_log),
            (
                "flushIntervalConsumeQueue",
                self.flush_interval_consume_queue,
            ),
            ("cleanResourceInterval", self.clean_resource_interval),
        ] {
            if value < MIN_TIMER_PERIOD_MS {
                return invalid(key, format!("must be at least {MIN_TIMER_PERIOD_MS} ms"));
            }
        }
        if self.transaction_check_interval < MIN_TIMER_PERIOD_MS {
            return invalid(
                "transactionCheckInterval",
                format!("must be at least {MIN_TIMER_PERIOD_MS} ms"),
            );
        }
        if self.transaction_check_max < 1 {
            return invalid("transactionCheckMax", "must be at least 1".into());
        }
        if self.register_name_server_period == 0 {
            return invalid("registerNameServerPeriod", "must be positive".into());
        }
        if self.register_broker_timeout_mills == 0 {
            return invalid("registerBrokerTimeoutMills", "must be positive".into());
        }
        if self.channel_expired_timeout == 0 {
            return invalid("channelExpiredTimeout", "must be positive".into());
        }
        if self.rebalance_lock_max_live_time < MIN_TIMER_PERIOD_MS {
            return invalid(
                "rocketmq.broker.rebalance.lockMaxLiveTime",
                format!("must be at least {MIN_TIMER_PERIOD_MS} ms"),
            );
        }
        if self.mapped_file_size_consume_queue < comet_store::consume_queue::CQ_STORE_UNIT_SIZE {
            return invalid(
                "mappedFileSizeConsumeQueue",
                "must hold at least one 20-byte entry".into(),
            );
        }
        for addr in &self.namesrv_addr {
            if !addr.contains(':') {
                return invalid("namesrvAddr", format!("entry {addr:?} is not host:port"));
            }
        }
        // The store validates segment sizes, ratios and delay levels; report them by key.
        self.to_store_config().validate().map_err(|e| {
            let text = e.to_string();
            let key = if text.contains("delay_level") {
                "messageDelayLevel"
            } else if text.contains("mapped_file_size_commit_log") {
                "mappedFileSizeCommitLog"
            } else if text.contains("max_message_size") {
                "maxMessageSize"
            } else {
                "storePathRootDir"
            };
            ConfigError::Invalid { key, reason: text }
        })?;
        if self.delay_levels_millis().is_empty() {
            return invalid("messageDelayLevel", "must define at least one level".into());
        }
        if self.tls_server_mode != comet_remoting::TlsMode::Disabled {
            if self.tls_server_cert_path.is_none() {
                return invalid(
                    "tlsServerCertPath",
                    "required when tlsServerMode is not disabled".into(),
                );
            }
            if self.tls_server_key_path.is_none() {
                return invalid(
                    "tlsServerKeyPath",
                    "required when tlsServerMode is not disabled".into(),
                );
            }
        }
        Ok(())
    }

    /// The listener keys: idle timeout and write-buffer bound within the transport's limits.
    fn validate_remoting(&self) -> Result<(), ConfigError> {
        self.server_config()
            .validate()
            .map_err(|e| ConfigError::Invalid {
                key: e.key(),
                reason: e.to_string(),
            })
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
            flush_interval_commit_log: Duration::from_millis(self.flush_interval_commit_log),
            flush_commit_log_timed: self.flush_commit_log_timed,
            flush_commit_log_least_pages: self.flush_commit_log_least_pages,
            flush_interval_consume_queue: Duration::from_millis(self.flush_interval_consume_queue),
            sync_flush_timeout: Duration::from_millis(self.sync_flush_timeout),
            max_message_size: self.max_message_size,
            check_crc_on_recover: self.check_crc_on_recover,
            message_index_enable: self.message_index_enable,
            max_hash_slot_num: self.max_hash_slot_num,
            max_index_num: self.max_index_num,
            file_reserved_time_hours: self.file_reserved_time,
            delete_when: self.delete_when.clone(),
            disk_max_used_space_ratio: self.disk_max_used_space_ratio,
            disk_space_clean_forcibly_ratio: self.disk_space_clean_forcibly_ratio,
            disk_space_warning_level_ratio: self.disk_space_warning_level_ratio,
            clean_resource_interval: Duration::from_millis(self.clean_resource_interval),
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

    /// The address the main listener binds.
    pub fn listen_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.listen_port)
    }

    /// `registerNameServerPeriod` clamped to RocketMQ's 10–60 s.
    pub fn register_period(&self) -> Duration {
        Duration::from_millis(self.register_name_server_period.clamp(
            MIN_REGISTER_NAME_SERVER_PERIOD_MS,
            MAX_REGISTER_NAME_SERVER_PERIOD_MS,
        ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_rocketmq_defaults() {
        let c = BrokerConfig::default();
        assert_eq!(c.broker_cluster_name, "DefaultCluster");
        assert_eq!(c.broker_name, "broker-a");
        assert_eq!(c.listen_port, 10911);
        assert_eq!(c.default_topic_queue_nums, 8);
        assert!(c.auto_create_topic_enable && c.auto_create_subscription_group);
        assert_eq!(c.broker_permission, 6);
        assert_eq!(c.register_name_server_period, 30_000);
        assert_eq!(c.delay_levels_millis().len(), 18);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn parses_properties_format() {
        let text = "# a comment\n! another\n\n  brokerClusterName = ClusterX  \nbrokerName:broker-b\n\
                    listenPort 10921\nnamesrvAddr=10.0.0.1:9876; 10.0.0.2:9876;\nflushDiskType=SYNC_FLUSH\n\
                    autoCreateTopicEnable=FALSE\nmessageDelayLevel=1s \\\n   5s 10s\nbrokerIP1=192.168.1.7\n\
                    enableCalcFilterBitMap=true\naclEnable=true\nstorePathRootDir=/data/store\n";
        let parsed = BrokerConfig::parse(text).unwrap();
        let c = &parsed.config;
        assert_eq!(c.broker_cluster_name, "ClusterX");
        assert_eq!(c.broker_name, "broker-b");
        assert_eq!(c.listen_port, 10921);
        assert_eq!(c.namesrv_addr, vec!["10.0.0.1:9876", "10.0.0.2:9876"]);
        assert_eq!(c.flush_disk_type, FlushDiskType::SyncFlush);
        assert!(!c.auto_create_topic_enable);
        assert_eq!(c.message_delay_level, "1s 5s 10s");
        assert_eq!(c.delay_levels_millis(), vec![1000, 5000, 10_000]);
        assert_eq!(c.resolve_broker_ip().to_string(), "192.168.1.7");
        assert_eq!(c.store_path_root_dir, PathBuf::from("/data/store"));
        assert!(c.acl_enable);
        assert_eq!(
            parsed.unknown_keys,
            vec!["enableCalcFilterBitMap".to_owned()]
        );
    }

    #[test]
    fn rebalance_lock_max_live_time_is_apaches_property_and_is_validated() {
        assert_eq!(
            BrokerConfig::default().rebalance_lock_max_live(),
            Duration::from_secs(60)
        );
        let c = BrokerConfig::parse("rocketmq.broker.rebalance.lockMaxLiveTime=15000\n")
            .unwrap()
            .config;
        assert_eq!(c.rebalance_lock_max_live(), Duration::from_secs(15));
        assert!(c.validate().is_ok());
        match BrokerConfig::parse("rocketmq.broker.rebalance.lockMaxLiveTime=0\n") {
            Err(ConfigError::Invalid { key, .. }) => {
                assert_eq!(key, "rocketmq.broker.rebalance.lockMaxLiveTime")
            }
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn remoting_keys_reach_the_listener_and_are_validated() {
        let c = BrokerConfig::parse(
            "serverChannelMaxIdleTimeSeconds=7\nwriteBufferHighWaterMark=1048576\n",
        )
        .unwrap()
        .config;
        let server = c.server_config();
        assert_eq!(server.idle_timeout, Some(Duration::from_secs(7)));
        assert_eq!(server.write_buffer_high_water_mark, 1_048_576);
        let defaults = BrokerConfig::default().server_config();
        assert_eq!(defaults.idle_timeout, Some(Duration::from_secs(120)));
        assert_eq!(
            defaults.write_buffer_high_water_mark,
            comet_remoting::limits::DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK
        );
        let off = BrokerConfig::parse("serverChannelMaxIdleTimeSeconds=0\n")
            .unwrap()
            .config;
        assert_eq!(off.server_config().idle_timeout, None);
        for (text, key) in [
            (
                "serverChannelMaxIdleTimeSeconds=86401\n",
                "serverChannelMaxIdleTimeSeconds",
            ),
            (
                "writeBufferHighWaterMark=1024\n",
                "writeBufferHighWaterMark",
            ),
        ] {
            match BrokerConfig::parse(text) {
                Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn acl_and_tls_keys() {
        let parsed = BrokerConfig::parse(
            "aclEnable=true\naclFile=/etc/comet/plain_acl.yml\ntlsServerMode=permissive\n\
             tlsServerCertPath=/etc/comet/server.pem\ntlsServerKeyPath=/etc/comet/server.key\n",
        )
        .unwrap();
        let c = &parsed.config;
        assert_eq!(c.acl_file_path(), PathBuf::from("/etc/comet/plain_acl.yml"));
        let tls = c.tls_config().unwrap();
        assert_eq!(tls.mode, comet_remoting::TlsMode::Permissive);
        assert_eq!(tls.key_path, PathBuf::from("/etc/comet/server.key"));
        assert!(BrokerConfig::default().tls_config().is_none());
        let err = BrokerConfig::parse("tlsServerMode=enforcing\n").unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Invalid {
                key: "tlsServerCertPath",
                ..
            }
        ));
        let err = BrokerConfig::parse("tlsServerMode=sometimes\n").unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Malformed {
                key: "tlsServerMode",
                ..
            }
        ));
    }

    #[test]
    fn malformed_and_invalid_values_name_the_key() {
        let err = BrokerConfig::parse("listenPort=99999\n").unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Malformed {
                key: "listenPort",
                ..
            }
        ));
        assert!(err.to_string().contains("listenPort"));
        let err = BrokerConfig::parse("flushDiskType=SOMETIMES\n").unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Malformed {
                key: "flushDiskType",
                ..
            }
        ));
        let err = BrokerConfig::parse("defaultTopicQueueNums=0\n").unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Invalid {
                key: "defaultTopicQueueNums",
                ..
            }
        ));
        let err = BrokerConfig::parse("messageDelayLevel=1x\n").unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Invalid {
                key: "messageDelayLevel",
                ..
            }
        ));
        let err = BrokerConfig::parse("namesrvAddr=localhost\n").unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Invalid {
                key: "namesrvAddr",
                ..
            }
        ));
        let err = BrokerConfig::parse("brokerRole=SLAVE\n").unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Invalid {
                key: "brokerId",
                ..
            }
        ));
        let err = BrokerConfig::parse("=value\n").unwrap_err();
        assert!(matches!(err, ConfigError::Syntax { line: 1, .. }));
    }

    #[test]
    fn print_then_parse_round_trips() {
        let c = BrokerConfig {
            broker_name: "broker-z".into(),
            namesrv_addr: vec!["127.0.0.1:9876".into(), "127.0.0.1:9877".into()],
            broker_ip1: Some("10.1.2.3".parse().unwrap()),
            store_path_commit_log: Some(PathBuf::from("/x/commitlog")),
            flush_disk_type: FlushDiskType::SyncFlush,
            ..BrokerConfig::default()
        };
        let text = c.to_properties();
        assert!(text.contains("brokerName=broker-z\n"));
        assert!(text.contains("namesrvAddr=127.0.0.1:9876;127.0.0.1:9877\n"));
        let back = BrokerConfig::parse(&text).unwrap();
        assert!(back.unknown_keys.is_empty());
        assert_eq!(back.config, c);
        assert_eq!(text.lines().count(), BrokerConfig::KEYS.len());
    }

    #[test]
    fn store_config_conversion() {
        let c = BrokerConfig {
            mapped_file_size_commit_log: 1 << 20,
            mapped_file_size_consume_queue: 20 * 1000,
            file_reserved_time: 48,
            ..BrokerConfig::default()
        };
        let s = c.to_store_config();
        assert_eq!(s.mapped_file_size_commit_log, 1 << 20);
        assert_eq!(s.consume_queue_entries_per_file, 1000);
        assert_eq!(s.file_reserved_time_hours, 48);
        assert_eq!(s.flush_disk_type, FlushDiskType::AsyncFlush);
    }

    #[test]
    fn register_period_is_clamped() {
        let mut c = BrokerConfig {
            register_name_server_period: 1000,
            ..BrokerConfig::default()
        };
        assert_eq!(c.register_period(), Duration::from_secs(10));
        c.register_name_server_period = 600_000;
        assert_eq!(c.register_period(), Duration::from_secs(60));
    }

    #[test]
    fn broker_ip_prefers_specific_bind_address() {
        let mut c = BrokerConfig {
            bind_address: "127.0.0.1".parse().unwrap(),
            ..BrokerConfig::default()
        };
        assert_eq!(c.resolve_broker_ip().to_string(), "127.0.0.1");
        c.bind_address = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        assert!(!c.resolve_broker_ip().is_unspecified());
    }
}
