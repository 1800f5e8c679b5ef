//! How each kind of `broker.conf` value is read and printed.

use std::net::IpAddr;
use std::path::PathBuf;

use comet_store::FlushDiskType;

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

/// `brokerRole`: a master that answers before (`ASYNC_MASTER`) or after (`SYNC_MASTER`) its
/// slaves hold a message, or a slave.
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

/// `metricsExporterType`: how the broker publishes its metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetricsExporterType {
    /// No metrics endpoint.
    #[default]
    Disable,
    /// An HTTP endpoint serving the Prometheus text format.
    Prom,
}

impl ConfigValue for MetricsExporterType {
    const EXPECTED: &'static str = "DISABLE or PROM (OTLP_GRPC and LOG are not available)";
    fn parse_value(raw: &str) -> Option<Self> {
        match raw {
            "DISABLE" => Some(MetricsExporterType::Disable),
            "PROM" => Some(MetricsExporterType::Prom),
            _ => None,
        }
    }
    fn render(&self) -> String {
        match self {
            MetricsExporterType::Disable => "DISABLE",
            MetricsExporterType::Prom => "PROM",
        }
        .to_owned()
    }
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
