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
//! (`--print-config`), the list of known keys and the configuration reference
//! (`docs/configuration.md`, see [`mod@reference`]) are generated from it, so they cannot drift
//! apart. Time fields carry their unit in their name (`sync_flush_timeout_ms`); the keys stay
//! Apache's (`syncFlushTimeout`).

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use comet_store::FlushDiskType;
use thiserror::Error;

mod derived;
pub mod persist;
mod properties;
pub mod reference;
pub mod runtime;
mod validate;
mod values;

pub use derived::first_non_loopback_ipv4;
pub use properties::{ParsedConfig, parse_pairs};
pub use reference::Applied;
pub use runtime::{ConfigChange, RuntimeConfig, UpdateError};
pub use values::{BrokerRole, ConfigValue, MetricsExporterType};

/// Default RocketMQ cluster name.
pub const DEFAULT_CLUSTER_NAME: &str = "DefaultCluster";
/// Default broker name.
pub const DEFAULT_BROKER_NAME: &str = "broker-a";
/// Default main listener port.
pub const DEFAULT_LISTEN_PORT: u16 = 10911;
/// Offset of the HA port from the main port (10911 → 10912).
pub const HA_PORT_OFFSET: u16 = 1;
/// Offset of the "fast" (VIP) port below the main port (10911 → 10909), which Apache's slaves
/// fetch the topic table from.
pub const FAST_PORT_OFFSET: u16 = 2;
/// Default `defaultTopicQueueNums` of a broker.
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
/// Largest `haTransferBatchSize`: an Apache slave reads each HA frame (12-byte header and body)
/// into a 4 MiB buffer.
pub const MAX_HA_BATCH_BYTES: usize = 4 * 1024 * 1024 - 12;
/// Default `configBlackList`: the keys `updateBrokerConfig` refuses (Apache's default).
pub const DEFAULT_CONFIG_BLACK_LIST: &str = "configBlackList;brokerConfigPath";
/// Keys `updateBrokerConfig` always refuses, whatever `configBlackList` says (as Apache does).
pub const ALWAYS_BLACK_LISTED: &[&str] = &["brokerConfigPath", "rocketmqHome", "configBlackList"];
/// Where runtime changes are kept without a `-c` file, under the store root.
pub const SAVED_CONFIG_FILE: &str = "config/broker.properties";
/// Longest `broker.conf` line accepted after joining continuations (a bound on hostile input).
pub const MAX_CONFIG_LINE_LEN: usize = comet_config_file::properties::MAX_LINE_LEN;

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

impl From<comet_config_file::properties::PropertiesError> for ConfigError {
    fn from(e: comet_config_file::properties::PropertiesError) -> Self {
        ConfigError::Syntax {
            line: e.line,
            reason: e.reason,
        }
    }
}

fn default_store_root() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
        .join("store")
}

/// Declares [`BrokerConfig`] from one table: each entry is a field with its doc comment, type
/// and default, then its `broker.conf` key, its unit (`-` for none), where the key comes from
/// (`apache`: a `broker.conf` key of Apache RocketMQ's broker; `property("name")`: set in Apache
/// as that JVM system property; `comet`: Comet's own) and when a change takes effect (`Live`:
/// `updateBrokerConfig` changes it while the broker runs; `Start`: read only at start). Parsing,
/// printing, the list of keys, what a runtime update may change and the configuration reference
/// are all generated from it, so they cannot drift apart.
macro_rules! broker_config {
    (
        $( $(#[doc = $doc:literal])* $field:ident : $ty:ty = $default:expr
            => $key:literal $unit:tt $origin:ident $(($apache_name:literal))? $applied:ident, )*
    ) => {
        /// The broker's settings (see the module docs for the file format).
        #[derive(Debug, Clone, PartialEq)]
        pub struct BrokerConfig {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl Default for BrokerConfig {
            fn default() -> Self {
                BrokerConfig { $( $field: $default, )* }
            }
        }

        impl BrokerConfig {
            /// Every `broker.conf` key this broker understands, in declaration order.
            pub const KEYS: &'static [&'static str] = &[$($key,)*];

            /// What each key means, for the configuration reference, in declaration order.
            pub const REFERENCE: &'static [reference::KeyDoc] = &[$(reference::KeyDoc {
                key: $key,
                unit: stringify!($unit),
                origin: reference::Origin::$origin $(($apache_name))?,
                applied: reference::Applied::$applied,
                doc: concat!($($doc, "\n"),*),
                expected: <$ty as ConfigValue>::EXPECTED,
            },)*];

            /// When a change of `key` takes effect; `None` for a key this broker does not know.
            pub fn applied(key: &str) -> Option<reference::Applied> {
                match key {
                    $($key => Some(reference::Applied::$applied),)*
                    _ => None,
                }
            }

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
    /// Name of the cluster the broker belongs to; routes group brokers by it. Read at start: it
    /// names system topics made then (the cluster topic, the POP revive and reply topics).
    broker_cluster_name: String = DEFAULT_CLUSTER_NAME.to_owned() => "brokerClusterName" - Apache Start,
    /// Name of the broker group; routes and message queues carry it.
    broker_name: String = DEFAULT_BROKER_NAME.to_owned() => "brokerName" - Apache Start,
    /// 0 for the master of a broker group, above 0 for each of its slaves (a master's is set to
    /// 0 whatever the file says, as Apache does).
    broker_id: i64 = 0 => "brokerId" - Apache Start,
    /// `ASYNC_MASTER` (answers before slaves have a copy), `SYNC_MASTER` (answers once
    /// `inSyncReplicas` brokers hold the message) or `SLAVE` (replicates its master, serves no
    /// sends). Read at start, when the role's replication services are made (Apache changes
    /// roles only through its controller, not by an update).
    broker_role: BrokerRole = BrokerRole::AsyncMaster => "brokerRole" - Apache Start,
    /// IP the main listener binds (`0.0.0.0`: every interface).
    bind_address: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED) => "bindAddress" - Apache Start,
    /// Port of the main listener; 0 picks an ephemeral port.
    listen_port: u16 = DEFAULT_LISTEN_PORT => "listenPort" - Apache Start,
    /// Port of the HA listener slaves replicate from (every broker opens one); 0 means
    /// `listenPort + 1`, or an ephemeral port when `listenPort` is 0.
    ha_listen_port: u16 = 0 => "haListenPort" - Apache Start,
    /// The master's HA address (`host:port`) a slave replicates from; empty: the one the name
    /// servers answer the slave's registration with.
    ha_master_address: String = String::new() => "haMasterAddress" - Apache Start,
    /// A slave reports its offset at least this often; a master sends a heartbeat frame after
    /// this long without data. A change reaches the open connections within a second.
    ha_send_heartbeat_interval_ms: u64 = 5_000 => "haSendHeartbeatInterval" ms Apache Live,
    /// Either side drops an HA connection on which nothing arrived for this long. A change
    /// reaches the open connections within a second.
    ha_housekeeping_interval_ms: u64 = 20_000 => "haHousekeepingInterval" ms Apache Live,
    /// Most CommitLog bytes one HA frame carries (a change applies from the next frame).
    ha_transfer_batch_size: usize = 32 * 1024 => "haTransferBatchSize" bytes Apache Live,
    /// A slave further behind its master than this is not counted as in sync
    /// (`haInSyncSlaveCount` of the runtime info).
    ha_max_gap_not_in_sync: u64 = 256 * 1024 * 1024 => "haMaxGapNotInSync" bytes Apache Live,
    /// Brokers (the master included) that must hold a message before a `SYNC_MASTER` answers its
    /// send. Apache's default is 1, with which a `SYNC_MASTER` waits for no slave; Comet's is 2,
    /// so that a `SYNC_MASTER` answers only once a slave has the message, as its name says. A
    /// change applies to the next send; lowered, it also releases the answers held for more
    /// copies.
    in_sync_replicas: u32 = 2 => "inSyncReplicas" count Apache Live,
    /// Brokers of the group, the master included (informational: acks follow
    /// `inSyncReplicas`; Apache reads it at start, and per lock request only in its
    /// `lockInStrictMode`, which Comet does not have).
    total_replicas: u32 = 1 => "totalReplicas" count Apache Start,
    /// A `SYNC_MASTER` send whose copies are still missing after this long answers
    /// FLUSH_SLAVE_TIMEOUT (the message stays stored). A change applies to the sends answered
    /// from then on.
    slave_timeout_ms: u64 = 3_000 => "slaveTimeout" ms Apache Live,
    /// A slave serves pulls (without it, a slave refuses every pull with SYSTEM_BUSY), and a
    /// master tells consumers that fall far behind to pull from a slave.
    slave_read_enable: bool = false => "slaveReadEnable" - Apache Live,
    /// Name servers to register with, `;`-separated `host:port`. A change registers with the
    /// new list at once; a name server dropped from it is not told, and expires the broker as it
    /// would a stopped one.
    namesrv_addr: Vec<String> = Vec::new() => "namesrvAddr" - Apache Live,
    /// The address clients reach this broker at (routes, message ids). Empty: the bind IP if
    /// specific, else the first non-loopback IPv4 of the host. A change registers the new
    /// address at once and then unregisters the old one, so routes follow; message ids and the
    /// gRPC endpoint's address keep the address the broker started with until it restarts (as
    /// Apache's message ids do).
    broker_ip1: Option<IpAddr> = None => "brokerIP1" - Apache Live,
    /// The address slaves reach this broker's HA listener at. Empty: as `brokerIP1`. A change
    /// is registered at once; slaves take it from their next registration.
    broker_ip2: Option<IpAddr> = None => "brokerIP2" - Apache Live,
    /// Root of the store (CommitLog, ConsumeQueue, index, config files); default `$HOME/store`.
    store_path_root_dir: PathBuf = default_store_root() => "storePathRootDir" - Apache Start,
    /// Directory of the CommitLog; empty means `<storePathRootDir>/commitlog`.
    store_path_commit_log: Option<PathBuf> = None => "storePathCommitLog" - Apache Start,
    /// `ASYNC_FLUSH` (answer from the page cache, flush on a timer) or `SYNC_FLUSH` (answer once
    /// the group commit is on disk). Read at start, when the flush service of the type is made.
    flush_disk_type: FlushDiskType = FlushDiskType::AsyncFlush => "flushDiskType" - Apache Start,
    /// Size of one CommitLog segment file.
    mapped_file_size_commit_log: usize =
        comet_store::config::DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG => "mappedFileSizeCommitLog" bytes Apache Start,
    /// Size of one ConsumeQueue file (20 bytes per entry). Read at start: every queue's files
    /// are read with it.
    mapped_file_size_consume_queue: usize =
        comet_store::config::DEFAULT_CONSUME_QUEUE_ENTRIES_PER_FILE * comet_store::consume_queue::CQ_STORE_UNIT_SIZE
        => "mappedFileSizeConsumeQueue" bytes Apache Start,
    /// Period of the CommitLog flush under `ASYNC_FLUSH`.
    flush_interval_commit_log_ms: u64 = 500 => "flushIntervalCommitLog" ms Apache Live,
    /// Under `ASYNC_FLUSH`, flush the CommitLog only every `flushIntervalCommitLog` instead of
    /// whenever `flushCommitLogLeastPages` are dirty.
    flush_commit_log_timed: bool = true => "flushCommitLogTimed" - Apache Live,
    /// Dirty 4 KiB pages an `ASYNC_FLUSH` flush waits for (untimed flushing).
    flush_commit_log_least_pages: usize = 4 => "flushCommitLogLeastPages" pages Apache Live,
    /// Period of the ConsumeQueue flush.
    flush_interval_consume_queue_ms: u64 = 1000 => "flushIntervalConsumeQueue" ms Apache Live,
    /// A `SYNC_FLUSH` send waiting longer than this answers FLUSH_DISK_TIMEOUT.
    sync_flush_timeout_ms: u64 = 5000 => "syncFlushTimeout" ms Apache Live,
    /// Largest message body (or batch body) accepted.
    max_message_size: usize = comet_protocol::limits::MAX_MESSAGE_SIZE => "maxMessageSize" bytes Apache Live,
    /// Check every record's CRC when recovering after a crash (recovery runs only at start).
    check_crc_on_recover: bool = true => "checkCRCOnRecover" - Apache Start,
    /// Keep the IndexFile (lookups by key and by unique id). Turned off while running, new
    /// messages are not indexed and those indexed before are still found; turned on, messages
    /// stored from then on are indexed (those stored meanwhile are not).
    message_index_enable: bool = true => "messageIndexEnable" - Apache Live,
    /// Every this many bytes read from the CommitLog, unmap the store's file pages behind the
    /// readers from the process, so the resident set does not grow with the data stored; 0
    /// keeps them mapped as RocketMQ does. Read at start, by the readers' trigger made then.
    mapped_pages_release_bytes: u64 =
        comet_store::page_release::DEFAULT_MAPPED_PAGES_RELEASE_BYTES => "mappedPagesReleaseBytes" bytes Comet Start,
    /// Flushed CommitLog pages more than this many bytes behind the end are dropped from the page
    /// cache, so appends reuse recently freed pages instead of ones the host must back first; 0
    /// leaves the page cache to the kernel. Read at start, by the thread made then.
    commit_log_page_cache_bytes: u64 =
        comet_store::page_release::DEFAULT_COMMIT_LOG_PAGE_CACHE_BYTES => "commitLogPageCacheBytes" bytes Comet Start,
    /// Bytes after the CommitLog's append position kept prepared: zeroed under `SYNC_FLUSH`, so a
    /// group commit's msync finds its blocks allocated instead of also writing the allocation's
    /// metadata; allocated (`fallocate`) under `ASYNC_FLUSH`, so an append never waits for the
    /// timed flush's block allocation. 0 leaves segments sparse until written. Read at start,
    /// by the thread made then.
    commit_log_zero_ahead_bytes: u64 =
        comet_store::zero_ahead::DEFAULT_COMMIT_LOG_ZERO_AHEAD_BYTES => "commitLogZeroAheadBytes" bytes Comet Start,
    /// Hash slots of one IndexFile (read at start, as the index's geometry).
    max_hash_slot_num: usize = 5_000_000 => "maxHashSlotNum" count Apache Start,
    /// Entries of one IndexFile (read at start, as the index's geometry).
    max_index_num: usize = 20_000_000 => "maxIndexNum" count Apache Start,
    /// How long CommitLog files are kept before they may be deleted.
    file_reserved_time_hours: u64 = 72 => "fileReservedTime" hours Apache Live,
    /// Hours of the day (`04`, `04;05`) when expired files are deleted.
    delete_when: String = "04".to_owned() => "deleteWhen" - Apache Live,
    /// Disk usage above which expired files are deleted at any hour.
    disk_max_used_space_ratio: u32 = 75 => "diskMaxUsedSpaceRatio" percent Apache Live,
    /// Disk usage above which the oldest files are deleted even if not expired.
    disk_space_clean_forcibly_ratio: u32 = 85 => "diskSpaceCleanForciblyRatio" percent Apache Live,
    /// Disk usage above which sends answer SERVICE_NOT_AVAILABLE.
    disk_space_warning_level_ratio: u32 = 90 => "diskSpaceWarningLevelRatio" percent Apache Live,
    /// Period of the retention check.
    clean_resource_interval_ms: u64 = 10_000 => "cleanResourceInterval" ms Apache Live,
    /// Share of memory a pull may read from before it counts as reading from disk.
    access_message_in_memory_max_ratio: u32 = 40 => "accessMessageInMemoryMaxRatio" percent Apache Live,
    /// Most bytes one pull returns when reading from memory.
    max_transfer_bytes_on_message_in_memory: usize = 256 * 1024 => "maxTransferBytesOnMessageInMemory" bytes Apache Live,
    /// Most messages one pull returns when reading from memory.
    max_transfer_count_on_message_in_memory: usize = 32 => "maxTransferCountOnMessageInMemory" count Apache Live,
    /// Most bytes one pull returns when reading from disk.
    max_transfer_bytes_on_message_in_disk: usize = 64 * 1024 => "maxTransferBytesOnMessageInDisk" bytes Apache Live,
    /// Most messages one pull returns when reading from disk.
    max_transfer_count_on_message_in_disk: usize = 8 => "maxTransferCountOnMessageInDisk" count Apache Live,
    /// Delay of each level (1-based), space-separated, units s/m/h/d. Read at start, when the
    /// delay queues (one per level) and their delivery are set up.
    message_delay_level: String =
        comet_store::config::DEFAULT_MESSAGE_DELAY_LEVEL.to_owned() => "messageDelayLevel" - Apache Start,
    /// Accept timer messages (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS) and deliver them
    /// at their time; when off, such sends, and POPs (whose checkpoints are timer messages), are
    /// refused with SYSTEM_ERROR. Turned off while running, the wheel still delivers what it
    /// holds; turned on in a broker started without it, the wheel is opened and started then.
    timer_wheel_enable: bool = true => "timerWheelEnable" - Apache Live,
    /// Width of one timer-wheel slot: timer messages are delivered at most this much after their
    /// time, never before. As in RocketMQ, the value used is the largest of 100, 200, 500 and
    /// 1000 not above this one. Read at start, with the wheel (Apache rounds new timer messages
    /// with the value in force, but its wheel keeps the slots it started with).
    timer_precision_ms: u64 = 1000 => "timerPrecisionMs" ms Apache Start,
    /// Furthest ahead a timer message may be due; later ones are refused with MESSAGE_ILLEGAL.
    /// A change applies to the next send (messages already parked keep their time).
    timer_max_delay_sec: u64 = 3600 * 24 * 3 => "timerMaxDelaySec" secs Apache Live,
    /// Slots ahead a timer message is parked directly; one due later is parked at the window's
    /// edge and parked again from there (rolled). As in RocketMQ, a value below 2 or above
    /// 604740 (7 days of slots, less 60) means 604740. The wheel holds 24 bytes per slot. Read
    /// at start, with the wheel.
    timer_roll_window_slot: u64 = 3600 * 24 * 2 => "timerRollWindowSlot" count Apache Start,
    /// Period of the timer checkpoint: a crash delivers again what was delivered since the last.
    /// A change counts from the last checkpoint (one already overdue is written at once).
    timer_flush_interval_ms: u64 = 1000 => "timerFlushIntervalMs" ms Apache Live,
    /// Queues of the POP revive log (`rmq_sys_REVIVE_LOG_<cluster>`); pops spread their
    /// checkpoints over them in turn. Read at start, when the queues and one revive task per
    /// queue are made (Apache's POPs read it per request, so a value raised there sends
    /// checkpoints to queues nothing revives).
    revive_queue_num: i32 = 8 => "reviveQueueNum" count Apache Start,
    /// Percent of POP requests that read the group's POP retry topic before the topic itself.
    pop_from_retry_probability: i32 = 20 => "popFromRetryProbability" percent Apache Live,
    /// Sends to unknown topics create them from TBW102. Turned off while running, TBW102 loses
    /// its INHERIT bit and the routes follow; turned on, TBW102 is made (or made inheritable)
    /// again, as at a start with it on.
    auto_create_topic_enable: bool = true => "autoCreateTopicEnable" - Apache Live,
    /// Groups are created on first use.
    auto_create_subscription_group: bool = true => "autoCreateSubscriptionGroup" - Apache Live,
    /// Queues of TBW102, and so the most an auto-created topic gets. Read at start, when TBW102
    /// is made (as in Apache).
    default_topic_queue_nums: i32 = DEFAULT_TOPIC_QUEUE_NUMS => "defaultTopicQueueNums" count Apache Start,
    /// The cluster-name topic is readable and writable (read at start, when it is made).
    cluster_topic_enable: bool = true => "clusterTopicEnable" - Apache Start,
    /// The broker-name topic is readable and writable (read at start, when it is made).
    broker_topic_enable: bool = true => "brokerTopicEnable" - Apache Start,
    /// Create the message-trace topic (at start).
    trace_topic_enable: bool = false => "traceTopicEnable" - Apache Start,
    /// Name of the message-trace topic (read at start, when it is made).
    msg_trace_topic_name: String = comet_protocol::naming::TRACE_TOPIC.to_owned() => "msgTraceTopicName" - Apache Start,
    /// Permission bits (READ 4, WRITE 2, INHERIT 1) ANDed into every topic's at registration;
    /// a change re-registers with the name servers at once.
    broker_permission: i32 = comet_protocol::body::perm::PERM_READ_WRITE => "brokerPermission" - Apache Live,
    /// The file `updateBrokerConfig` writes its changes to, so that they survive a restart.
    /// Empty: the `-c` file the broker started with, else `<storePathRootDir>/config/broker.properties`,
    /// which `comet broker` and `comet serve` read at start when they have no `-c` file. Always
    /// black-listed: `updateBrokerConfig` refuses it with NO_PERMISSION.
    broker_config_path: Option<PathBuf> = None => "brokerConfigPath" - Apache Start,
    /// `;`-separated keys `updateBrokerConfig` refuses with NO_PERMISSION, on top of
    /// `brokerConfigPath`, `rocketmqHome` and `configBlackList`, which are always refused.
    config_black_list: String = DEFAULT_CONFIG_BLACK_LIST.to_owned() => "configBlackList" - Apache Start,
    /// Hold pulls that find nothing until a message arrives (long polling).
    long_polling_enable: bool = true => "longPollingEnable" - Apache Live,
    /// How long a pull that finds nothing is held when long polling is off.
    short_polling_time_ms: u64 = 1000 => "shortPollingTimeMills" ms Apache Live,
    /// Period of the registration with the name servers, clamped to 10–60 s. Read at start,
    /// when the registration is scheduled (as in Apache).
    register_name_server_period_ms: u64 = 30_000 => "registerNameServerPeriod" ms Apache Start,
    /// Timeout of one registration call (a change applies from the next registration).
    register_broker_timeout_ms: u64 = 24_000 => "registerBrokerTimeoutMills" ms Apache Live,
    /// Period of the consumer-offset and delay-progress flush. Read at start, when the flush is
    /// scheduled (as in Apache).
    flush_consumer_offset_interval_ms: u64 = 5000 => "flushConsumerOffsetInterval" ms Apache Start,
    /// Clients silent for this long are dropped.
    channel_expired_timeout_ms: u64 = 120_000 => "channelExpiredTimeout" ms Apache Live,
    /// How long an orderly consumer's queue lock lives without a refresh before another member
    /// of its group may take the queue. Clients refresh their locks every 20 s: a shorter value
    /// lets a queue change hands between two refreshes of a live consumer. Read at start (Apache
    /// reads the property once).
    rebalance_lock_max_live_time_ms: u64 = 60_000
        => "rocketmq.broker.rebalance.lockMaxLiveTime" ms Property("rocketmq.broker.rebalance.lockMaxLiveTime") Start,
    /// Connections (broker and, under `comet serve`, name server) that send nothing for this long
    /// are closed; 0 never closes them. A change applies to the broker's connections accepted
    /// from then on, as in Apache; open ones keep the timeout they were accepted with.
    server_channel_max_idle_time_seconds: u64 =
        comet_remoting::limits::DEFAULT_IDLE_TIMEOUT.as_secs() => "serverChannelMaxIdleTimeSeconds" secs Apache Live,
    /// Unsent responses of one connection above which it stops reading requests and
    /// broker-to-client calls are refused. Read at start (in Apache, a socket option of the
    /// listener set when it starts).
    write_buffer_high_water_mark: usize =
        comet_remoting::limits::DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK => "writeBufferHighWaterMark" bytes Apache Start,
    /// The MSG_REGION announced in send responses.
    region_id: String = comet_protocol::headers::DEFAULT_MSG_REGION.to_owned() => "regionId" - Apache Live,
    /// The TRACE_ON announced in send responses.
    trace_on: bool = true => "traceOn" - Apache Live,
    /// `PROM` serves metrics in the Prometheus text format at
    /// `http://<metricsPromExporterHost>:<metricsPromExporterPort>/metrics`; `DISABLE` serves
    /// none. Apache's `OTLP_GRPC` and `LOG` exporters are not available. `comet serve` turns
    /// `PROM` on unless this key is set.
    metrics_exporter_type: MetricsExporterType = MetricsExporterType::Disable => "metricsExporterType" - Apache Start,
    /// IP the metrics endpoint binds; empty means 127.0.0.1 (Apache falls back to `brokerIP1`:
    /// Comet keeps metrics on loopback unless told otherwise).
    metrics_prom_exporter_host: Option<IpAddr> = None => "metricsPromExporterHost" - Apache Start,
    /// Port of the metrics endpoint; 0 picks an ephemeral port.
    metrics_prom_exporter_port: u16 = 5557 => "metricsPromExporterPort" - Apache Start,
    /// Extra labels on every metric, `key:value` pairs separated by commas.
    metrics_label: String = String::new() => "metricsLabel" - Apache Start,
    /// Serve the RocketMQ 5.x gRPC protocol (`apache.rocketmq.v2.MessagingService`, which the
    /// 5.x SDKs speak to Apache's proxy) on `grpcServerPort`, at the listener's bind address.
    /// `comet serve` turns it on unless this key is set. Under `aclEnable` every call must carry
    /// the `authorization` header the 5.x SDKs send, signed with a `plain_acl.yml` account.
    enable_grpc_server: bool = false => "enableGrpcServer" - Comet Start,
    /// Port of the gRPC endpoint (the port Apache's proxy uses by default); 0 picks an ephemeral
    /// port.
    grpc_server_port: u16 = 8081 => "grpcServerPort" - Comet Start,
    /// TLS on the gRPC port: `permissive` (TLS and plaintext on the one port, as Apache's proxy
    /// serves by default), `enforcing` (TLS only) or `disabled`. The certificate is
    /// `tlsServerCertPath`/`tlsServerKeyPath` when both are set, else a self-signed one made at
    /// start-up (the 5.x SDKs trust any certificate).
    grpc_tls_mode: comet_remoting::TlsMode = comet_remoting::TlsMode::Permissive => "grpcTlsMode" - Comet Start,
    /// Refuse a gRPC send whose message type (read from its properties) its topic's
    /// `message.type` attribute does not take, and tell producers to check it themselves (the
    /// key of Apache's proxy; remoting sends are not checked, as on Apache's broker).
    enable_topic_message_type_check: bool = true => "enableTopicMessageTypeCheck" - Comet Live,
    /// Shortest invisible time a gRPC ReceiveMessage may ask for (the key of Apache's proxy);
    /// a shorter one is refused with ILLEGAL_INVISIBLE_TIME.
    min_invisible_time_mills_for_recv: u64 = 10_000 => "minInvisibleTimeMillsForRecv" ms Comet Live,
    /// Invisible time of the messages a gRPC push consumer receives (`auto_renew`), in place of
    /// the one it asks for, and of each renewal while the client processes them (the key of
    /// Apache's proxy).
    default_invisible_time_mills: u64 = 60_000 => "defaultInvisibleTimeMills" ms Comet Live,
    /// Shortest long poll of a gRPC ReceiveMessage (the key of Apache's proxy): a request asking
    /// for less waits this long, and one whose call has less time left is refused.
    grpc_client_consumer_min_long_polling_timeout_millis: u64 = 5_000 => "grpcClientConsumerMinLongPollingTimeoutMillis" ms Comet Live,
    /// Let UPDATE_AND_CREATE_TOPIC give a topic `message.type=MIXED` (all types on one topic).
    enable_mixed_message_type: bool = false => "enableMixedMessageType" - Apache Live,
    /// Check every request against `plain_acl.yml` (ACL 1.0). Read at start, when the check is
    /// installed on the listeners.
    acl_enable: bool = false => "aclEnable" - Apache Start,
    /// The `plain_acl.yml` to use; empty means `$ROCKETMQ_HOME/conf/plain_acl.yml`. Its content
    /// is reloaded when it changes; the path is read at start.
    acl_file: Option<PathBuf> = None => "aclFile" - Property("rocketmq.acl.plain.file") Start,
    /// `disabled`, `permissive` (TLS and plaintext on the listen port) or `enforcing` (TLS only).
    tls_server_mode: comet_remoting::TlsMode = comet_remoting::TlsMode::Disabled => "tlsServerMode" - Property("tls.server.mode") Start,
    /// PEM certificate chain of the listener.
    tls_server_cert_path: Option<PathBuf> = None => "tlsServerCertPath" - Property("tls.server.certPath") Start,
    /// PEM private key of the listener.
    tls_server_key_path: Option<PathBuf> = None => "tlsServerKeyPath" - Property("tls.server.keyPath") Start,
    /// A half message younger than this is not checked yet.
    transaction_timeout_ms: u64 = 6_000 => "transactionTimeOut" ms Apache Live,
    /// Period of the transaction check service.
    transaction_check_interval_ms: u64 = 30_000 => "transactionCheckInterval" ms Apache Live,
    /// Checks of one half message before it is discarded.
    transaction_check_max: i32 = 15 => "transactionCheckMax" count Apache Live,
}

/// Environment variable naming RocketMQ's home; the default ACL file lives under it.
pub const ROCKETMQ_HOME_ENV: &str = "ROCKETMQ_HOME";
/// The ACL file relative to RocketMQ's home (or to the working directory without one).
pub const DEFAULT_ACL_FILE: &str = "conf/plain_acl.yml";

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
        assert_eq!(c.register_name_server_period_ms, 30_000);
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
            file_reserved_time_hours: 48,
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
            register_name_server_period_ms: 1000,
            ..BrokerConfig::default()
        };
        assert_eq!(c.register_period(), Duration::from_secs(10));
        c.register_name_server_period_ms = 600_000;
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

    #[test]
    fn grpc_is_served_with_or_without_acl() {
        let mut c = BrokerConfig::default();
        assert!(!c.serves_grpc(), "off by default");
        c.set("enableGrpcServer", "true").unwrap();
        assert!(c.serves_grpc());
        c.set("aclEnable", "true").unwrap();
        assert!(
            c.serves_grpc(),
            "the endpoint checks credentials under aclEnable"
        );
    }
}
