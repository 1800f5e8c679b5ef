//! Validation of a whole configuration: every value the broker relies on, reported by key.

use super::{
    BrokerConfig, BrokerRole, ConfigError, MAX_HA_BATCH_BYTES, MAX_QUEUE_NUMS, MIN_TIMER_PERIOD_MS,
};

fn invalid(key: &'static str, reason: String) -> Result<(), ConfigError> {
    Err(ConfigError::Invalid { key, reason })
}

impl BrokerConfig {
    /// Checks every value the broker relies on; the error names the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_remoting()?;
        self.validate_identity()?;
        self.validate_periods()?;
        self.validate_store()?;
        self.validate_metrics()?;
        self.validate_tls()
    }

    /// The metric labels parse.
    fn validate_metrics(&self) -> Result<(), ConfigError> {
        match self.metrics_labels() {
            Ok(_) => Ok(()),
            Err(reason) => invalid("metricsLabel", reason),
        }
    }

    /// Names, role, topic defaults and limits.
    fn validate_identity(&self) -> Result<(), ConfigError> {
        if self.broker_cluster_name.trim().is_empty() {
            return invalid("brokerClusterName", "must not be empty".into());
        }
        if self.broker_name.trim().is_empty() {
            return invalid("brokerName", "must not be empty".into());
        }
        if self.broker_role == BrokerRole::Slave && self.broker_id <= 0 {
            return invalid(
                "brokerId",
                format!(
                    "a SLAVE's brokerId must be above 0 (0 is its master's); got {}",
                    self.broker_id
                ),
            );
        }
        if self.in_sync_replicas == 0 {
            return invalid("inSyncReplicas", "must be at least 1".into());
        }
        if self.ha_max_gap_not_in_sync == 0 {
            return invalid(
                "haMaxGapNotInSync",
                "must be positive (0 counts no slave as in sync)".into(),
            );
        }
        if !self.ha_master_address.is_empty() && !self.ha_master_address.contains(':') {
            return invalid(
                "haMasterAddress",
                format!("{:?} is not host:port", self.ha_master_address),
            );
        }
        if self.ha_transfer_batch_size == 0 || self.ha_transfer_batch_size > MAX_HA_BATCH_BYTES {
            return invalid(
                "haTransferBatchSize",
                format!("must be within 1..={MAX_HA_BATCH_BYTES}"),
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
        for addr in &self.namesrv_addr {
            if !addr.contains(':') {
                return invalid("namesrvAddr", format!("entry {addr:?} is not host:port"));
            }
        }
        Ok(())
    }

    /// Periods and timeouts: timers fast enough to matter, never zero.
    fn validate_periods(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("shortPollingTimeMills", self.short_polling_time_ms),
            (
                "flushConsumerOffsetInterval",
                self.flush_consumer_offset_interval_ms,
            ),
            ("flushIntervalCommitLog", self.flush_interval_commit_log_ms),
            (
                "flushIntervalConsumeQueue",
                self.flush_interval_consume_queue_ms,
            ),
            ("cleanResourceInterval", self.clean_resource_interval_ms),
            (
                "haSendHeartbeatInterval",
                self.ha_send_heartbeat_interval_ms,
            ),
            ("haHousekeepingInterval", self.ha_housekeeping_interval_ms),
            ("slaveTimeout", self.slave_timeout_ms),
            ("timerFlushIntervalMs", self.timer_flush_interval_ms),
        ] {
            if value < MIN_TIMER_PERIOD_MS {
                return invalid(key, format!("must be at least {MIN_TIMER_PERIOD_MS} ms"));
            }
        }
        if self.transaction_check_interval_ms < MIN_TIMER_PERIOD_MS {
            return invalid(
                "transactionCheckInterval",
                format!("must be at least {MIN_TIMER_PERIOD_MS} ms"),
            );
        }
        if self.timer_precision_ms == 0 || self.timer_precision_ms > 3_600_000 {
            return invalid(
                "timerPrecisionMs",
                "must be between 1 ms and one hour".into(),
            );
        }
        if self.transaction_check_max < 1 {
            return invalid("transactionCheckMax", "must be at least 1".into());
        }
        if self.register_name_server_period_ms == 0 {
            return invalid("registerNameServerPeriod", "must be positive".into());
        }
        if self.register_broker_timeout_ms == 0 {
            return invalid("registerBrokerTimeoutMills", "must be positive".into());
        }
        if self.timer_max_delay_sec == 0 {
            return invalid("timerMaxDelaySec", "must be at least 1 s".into());
        }
        if self.channel_expired_timeout_ms == 0 {
            return invalid("channelExpiredTimeout", "must be positive".into());
        }
        if self.rebalance_lock_max_live_time_ms < MIN_TIMER_PERIOD_MS {
            return invalid(
                "rocketmq.broker.rebalance.lockMaxLiveTime",
                format!("must be at least {MIN_TIMER_PERIOD_MS} ms"),
            );
        }
        Ok(())
    }

    /// The store's keys, checked by the store and reported by key.
    fn validate_store(&self) -> Result<(), ConfigError> {
        if self.mapped_file_size_consume_queue < comet_store::consume_queue::CQ_STORE_UNIT_SIZE {
            return invalid(
                "mappedFileSizeConsumeQueue",
                "must hold at least one 20-byte entry".into(),
            );
        }
        // The store validates segment sizes, ratios and delay levels; report them by key.
        self.to_store_config().validate().map_err(|e| {
            let text = e.to_string();
            let key = [
                ("delay_level", "messageDelayLevel"),
                ("mapped_file_size_commit_log", "mappedFileSizeCommitLog"),
                ("max_message_size", "maxMessageSize"),
                ("disk_max_used_space_ratio", "diskMaxUsedSpaceRatio"),
                (
                    "disk_space_clean_forcibly_ratio",
                    "diskSpaceCleanForciblyRatio",
                ),
                (
                    "disk_space_warning_level_ratio",
                    "diskSpaceWarningLevelRatio",
                ),
                (
                    "access_message_in_memory_max_ratio",
                    "accessMessageInMemoryMaxRatio",
                ),
            ]
            .iter()
            .find(|(field, _)| text.contains(field))
            .map_or("storePathRootDir", |(_, key)| key);
            ConfigError::Invalid { key, reason: text }
        })?;
        if let Err(e) = comet_store::cleanup::parse_delete_when(&self.delete_when) {
            return invalid("deleteWhen", e.to_string());
        }
        if self.delay_levels_millis().is_empty() {
            return invalid("messageDelayLevel", "must define at least one level".into());
        }
        Ok(())
    }

    /// A TLS listener needs its certificate and key.
    fn validate_tls(&self) -> Result<(), ConfigError> {
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
}
