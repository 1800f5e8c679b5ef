//! `comet serve`: a name server and a broker in one process, zero configuration.
//!
//! The broker registers with the embedded name server, keeps its store under `<data-dir>/store`
//! and advertises the address it listens on. Every broker.conf key can still be set with
//! `-c`, `COMET_<KEY>` or `--set`, exactly as for `comet broker`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use comet_broker::BrokerConfig;
use comet_broker::config::MetricsExporterType;
use comet_console::ConsoleConfig;
use comet_namesrv::NamesrvConfig;
use comet_remoting::{TlsConfig, TlsMode};

use crate::broker::BrokerArgs;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Name server listen address.
    #[arg(long, default_value = "127.0.0.1:9876", env = "COMET_NAMESRV_LISTEN")]
    pub namesrv_listen: String,
    /// Broker listen address (its IP is also advertised as brokerIP1 unless that is set).
    #[arg(long, default_value = "127.0.0.1:10911", env = "COMET_BROKER_LISTEN")]
    pub broker_listen: SocketAddr,
    /// Data directory (commit log, consume queues, config files, name server state).
    #[arg(long, default_value_os_t = crate::default_data_dir(), env = "COMET_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Once both servers accept connections, write `{"namesrv":"ip:port","broker":"ip:port"}` here
    /// (atomically), with `"metrics":"ip:port"` when the metrics endpoint is on and
    /// `"grpc":"ip:port"` when the gRPC endpoint is, and `"console":"ip:port"` when the console is.
    /// Lets scripts and tests use port 0 and learn the real ports.
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
    #[command(flatten)]
    pub broker: BrokerArgs,
}

fn write_ready_file(
    path: &std::path::Path,
    namesrv: SocketAddr,
    broker: SocketAddr,
    metrics: Option<SocketAddr>,
    grpc: Option<SocketAddr>,
    console: Option<SocketAddr>,
) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let metrics = metrics.map_or_else(String::new, |m| format!(",\"metrics\":\"{m}\""));
    let grpc = grpc.map_or_else(String::new, |g| format!(",\"grpc\":\"{g}\""));
    let console = console.map_or_else(String::new, |c| format!(",\"console\":\"{c}\""));
    let text =
        format!("{{\"namesrv\":\"{namesrv}\",\"broker\":\"{broker}\"{metrics}{grpc}{console}}}\n");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

/// The embedded broker's base configuration before files, environment and flags apply. Its
/// `namesrvAddr` is left empty: the embedded name server's address is filled in once it listens,
/// unless a layer set one.
fn base_config(args: &ServeArgs) -> BrokerConfig {
    BrokerConfig {
        bind_address: args.broker_listen.ip(),
        listen_port: args.broker_listen.port(),
        broker_ip1: (!args.broker_listen.ip().is_unspecified()).then(|| args.broker_listen.ip()),
        store_path_root_dir: args.data_dir.join("store"),
        // Metrics are on, on loopback, unless a layer says otherwise; with an ephemeral broker
        // port the metrics port is ephemeral too, so several instances can share a host.
        metrics_exporter_type: MetricsExporterType::Prom,
        metrics_prom_exporter_port: if args.broker_listen.port() == 0 {
            0
        } else {
            BrokerConfig::default().metrics_prom_exporter_port
        },
        // The gRPC endpoint (RocketMQ 5.x SDKs) is on too, ephemeral with an ephemeral broker.
        enable_grpc_server: true,
        grpc_server_port: if args.broker_listen.port() == 0 {
            0
        } else {
            BrokerConfig::default().grpc_server_port
        },
        ..BrokerConfig::default()
    }
}

/// The console's base configuration before the layers apply: on, on loopback, its accounts file
/// under the data directory, and on an ephemeral port when the broker's is.
fn console_base(args: &ServeArgs) -> ConsoleConfig {
    ConsoleConfig {
        port: if args.broker_listen.port() == 0 {
            0
        } else {
            ConsoleConfig::default().port
        },
        data_dir: args.data_dir.join("console"),
        ..ConsoleConfig::default()
    }
}

/// The embedded name server shares the broker's listener keys: `serverChannelMaxIdleTimeSeconds`,
/// `writeBufferHighWaterMark` and TLS. With TLS on, the name server runs *permissive* whatever the
/// broker's mode, because the broker registers with it over plaintext.
fn namesrv_config(args: &ServeArgs, broker: &BrokerConfig) -> NamesrvConfig {
    let tls = broker.tls_config().map(|tls| TlsConfig {
        mode: TlsMode::Permissive,
        ..tls
    });
    NamesrvConfig {
        idle_timeout: broker.server_idle_timeout(),
        write_buffer_high_water_mark: broker.write_buffer_high_water_mark,
        tls,
        ..NamesrvConfig::new(args.namesrv_listen.clone(), args.data_dir.join("namesrv"))
    }
}

pub async fn run(args: ServeArgs) -> Result<()> {
    let mut config = crate::broker::resolve(base_config(&args), &args.broker)?;
    if args.broker.print_config {
        if config.namesrv_addr.is_empty() {
            config.namesrv_addr = vec![args.namesrv_listen.clone()];
        }
        print!("{}", config.to_properties());
        return Ok(());
    }
    let console_config = crate::console::resolve(console_base(&args), &args.broker)?;
    let namesrv = crate::namesrv::start_with(namesrv_config(&args, &config)).await?;
    if config.namesrv_addr.is_empty() {
        config.namesrv_addr = vec![namesrv.local_addr().to_string()];
    }
    let console_namesrv = config.namesrv_addr.join(";");
    let broker = crate::broker::start(config).await?;
    let console = crate::console::start_embedded(console_config, &console_namesrv).await;
    tracing::info!(
        namesrv = %namesrv.local_addr(),
        broker = %broker.handle.local_addr(),
        data_dir = %args.data_dir.display(),
        "comet serving: point clients at namesrvAddr={}",
        namesrv.local_addr()
    );
    if let Some(path) = &args.ready_file {
        write_ready_file(
            path,
            namesrv.local_addr(),
            broker.handle.local_addr(),
            broker.handle.metrics_addr(),
            broker.grpc_addr(),
            console.as_ref().map(|c| c.local_addr()),
        )?;
    }
    crate::wait_for_signal().await?;
    tracing::info!("shutting down");
    if let Some(console) = console {
        console.shutdown().await;
    }
    let result = broker.shutdown().await;
    namesrv.shutdown().await;
    result
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// `comet serve` arguments with the broker on `listen` and these `key=value` overrides.
    fn args(listen: &str, overrides: Vec<String>) -> ServeArgs {
        ServeArgs {
            namesrv_listen: "127.0.0.1:0".to_owned(),
            broker_listen: listen.parse().expect("literal address"),
            data_dir: PathBuf::from("/tmp/comet-serve-test"),
            ready_file: None,
            broker: BrokerArgs {
                overrides,
                ..BrokerArgs::default()
            },
        }
    }

    #[test]
    fn embedded_name_server_shares_the_listener_keys() {
        let args = args(
            "127.0.0.1:0",
            vec![
                "serverChannelMaxIdleTimeSeconds=7".to_owned(),
                "writeBufferHighWaterMark=1048576".to_owned(),
                "tlsServerMode=enforcing".to_owned(),
                "tlsServerCertPath=/etc/comet/server.pem".to_owned(),
                "tlsServerKeyPath=/etc/comet/server.key".to_owned(),
            ],
        );
        let broker = crate::broker::resolve(base_config(&args), &args.broker).unwrap();
        assert!(broker.namesrv_addr.is_empty(), "filled in once it listens");
        let namesrv = namesrv_config(&args, &broker);
        assert_eq!(namesrv.idle_timeout, Some(Duration::from_secs(7)));
        assert_eq!(namesrv.write_buffer_high_water_mark, 1_048_576);
        assert_eq!(namesrv.validate(), Ok(()));
        let tls = namesrv.tls.expect("TLS follows the broker");
        assert_eq!(tls.mode, TlsMode::Permissive);
        assert_eq!(tls.cert_path, PathBuf::from("/etc/comet/server.pem"));

        let plain = ServeArgs {
            broker: BrokerArgs::default(),
            ..args
        };
        let broker = crate::broker::resolve(base_config(&plain), &plain.broker).unwrap();
        assert_eq!(namesrv_config(&plain, &broker).tls, None);
    }

    #[test]
    fn metrics_are_on_by_default_and_ephemeral_with_an_ephemeral_broker() {
        let resolve = |a: &ServeArgs| crate::broker::resolve(base_config(a), &a.broker).unwrap();
        let fixed = resolve(&args("127.0.0.1:10911", vec![]));
        assert_eq!(fixed.metrics_exporter_type, MetricsExporterType::Prom);
        assert_eq!(
            fixed.metrics_listen_addr(),
            SocketAddr::from(([127, 0, 0, 1], 5557))
        );
        let ephemeral = resolve(&args("127.0.0.1:0", vec![]));
        assert_eq!(ephemeral.metrics_prom_exporter_port, 0);
        let off = resolve(&args(
            "127.0.0.1:0",
            vec!["metricsExporterType=DISABLE".to_owned()],
        ));
        assert_eq!(off.metrics_exporter_type, MetricsExporterType::Disable);
    }

    #[test]
    fn grpc_is_on_by_default_and_ephemeral_with_an_ephemeral_broker() {
        let resolve = |a: &ServeArgs| crate::broker::resolve(base_config(a), &a.broker).unwrap();
        let fixed = resolve(&args("127.0.0.1:10911", vec![]));
        assert!(fixed.enable_grpc_server);
        assert_eq!(
            fixed.grpc_listen_addr(),
            SocketAddr::from(([127, 0, 0, 1], 8081))
        );
        assert_eq!(resolve(&args("127.0.0.1:0", vec![])).grpc_server_port, 0);
        let off = resolve(&args(
            "127.0.0.1:0",
            vec!["enableGrpcServer=false".to_owned()],
        ));
        assert!(!off.enable_grpc_server);
    }

    #[test]
    fn ready_file_names_the_grpc_endpoint() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ready.json");
        let addr = |port| SocketAddr::from(([127, 0, 0, 1], port));
        write_ready_file(&path, addr(1), addr(2), None, Some(addr(3)), None).expect("written");
        let text = std::fs::read_to_string(&path).expect("readable");
        assert_eq!(
            text,
            "{\"namesrv\":\"127.0.0.1:1\",\"broker\":\"127.0.0.1:2\",\"grpc\":\"127.0.0.1:3\"}\n"
        );
    }

    #[test]
    fn console_is_on_by_default_and_ephemeral_with_an_ephemeral_broker() {
        let resolve = |a: &ServeArgs| crate::console::resolve(console_base(a), &a.broker).unwrap();
        let fixed = resolve(&args("127.0.0.1:10911", vec![]));
        assert!(fixed.enable);
        assert_eq!(
            fixed.listen_addr(),
            SocketAddr::from(([127, 0, 0, 1], 8080))
        );
        assert_eq!(
            fixed.data_dir,
            PathBuf::from("/tmp/comet-serve-test/console")
        );
        let ephemeral = resolve(&args("127.0.0.1:0", vec![]));
        assert_eq!(ephemeral.port, 0);
        let off = resolve(&args("127.0.0.1:0", vec!["consoleEnable=false".to_owned()]));
        assert!(!off.enable);
    }

    #[test]
    fn ready_file_names_the_console() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ready.json");
        let a = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
        write_ready_file(&path, a(1), a(2), Some(a(3)), None, Some(a(4))).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["console"], "127.0.0.1:4");
        assert_eq!(v["metrics"], "127.0.0.1:3");
        write_ready_file(&path, a(1), a(2), None, None, None).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(v.get("console").is_none());
    }
}
