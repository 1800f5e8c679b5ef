//! `comet broker-config get|set` and `comet namesrv-config get|set` (mqadmin `getBrokerConfig`,
//! `updateBrokerConfig`, `getNamesrvConfig`, `updateNamesrvConfig`): settings as `key=value`
//! pairs under RocketMQ's key names. What a set may change is the server's decision: Comet's
//! broker applies the keys it can change while running (and writes them to its config file, so a
//! restart keeps them) and refuses the others by name, changing nothing; the refusal is printed
//! with the broker's reason and response code.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use comet_client::ClientError;
use comet_client::admin::MQAdmin;
use comet_protocol::code::ResponseCode;

use super::group_admin::target;
use super::{ConnectArgs, Table};

/// Arguments of `comet broker-config`.
#[derive(Debug, Args)]
pub struct BrokerConfigArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(subcommand)]
    pub command: BrokerConfigCommand,
}

/// The `comet broker-config` subcommands.
#[derive(Debug, Subcommand)]
pub enum BrokerConfigCommand {
    /// Print a broker's settings (every master's with -c).
    Get {
        /// Broker address (ip:port).
        #[arg(short = 'b', long, conflicts_with = "cluster")]
        broker: Option<String>,
        /// Cluster name (default DefaultCluster when no broker is given).
        #[arg(short = 'c', long)]
        cluster: Option<String>,
        /// Only these keys.
        keys: Vec<String>,
    },
    /// Change settings of a broker (every master's with -c) while it runs.
    Set {
        /// Broker address (ip:port).
        #[arg(short = 'b', long, conflicts_with = "cluster")]
        broker: Option<String>,
        /// Cluster name (default DefaultCluster when no broker is given).
        #[arg(short = 'c', long)]
        cluster: Option<String>,
        /// `key=value` pairs.
        #[arg(required = true)]
        settings: Vec<String>,
    },
}

/// Arguments of `comet namesrv-config`.
#[derive(Debug, Args)]
pub struct NamesrvConfigArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(subcommand)]
    pub command: NamesrvConfigCommand,
}

/// The `comet namesrv-config` subcommands.
#[derive(Debug, Subcommand)]
pub enum NamesrvConfigCommand {
    /// Print every name server's settings.
    Get {
        /// Only these keys.
        keys: Vec<String>,
    },
    /// Change settings of every name server while it runs.
    Set {
        /// `key=value` pairs.
        #[arg(required = true)]
        settings: Vec<String>,
    },
}

/// Parses `key=value` arguments.
fn parse_settings(pairs: &[String]) -> Result<BTreeMap<String, String>> {
    let mut settings = BTreeMap::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("{pair:?} is not key=value");
        };
        if key.trim().is_empty() {
            bail!("{pair:?} has no key");
        }
        settings.insert(key.trim().to_owned(), value.trim().to_owned());
    }
    Ok(settings)
}

/// Prints settings per server: JSON `{server: {key: value}}` or a table, only `keys` if given.
fn print_settings(all: BTreeMap<String, BTreeMap<String, String>>, keys: &[String], json: bool) {
    let all: BTreeMap<String, BTreeMap<String, String>> = all
        .into_iter()
        .map(|(server, settings)| {
            let kept = settings
                .into_iter()
                .filter(|(k, _)| keys.is_empty() || keys.contains(k))
                .collect();
            (server, kept)
        })
        .collect();
    if json {
        println!("{}", serde_json::json!(all));
        return;
    }
    let mut table = Table::new(["SERVER", "KEY", "VALUE"]);
    for (server, settings) in all {
        for (k, v) in settings {
            table.row([server.clone(), k, v]);
        }
    }
    table.print();
}

/// Runs `comet broker-config`.
pub async fn run_broker(args: BrokerConfigArgs) -> Result<()> {
    let admin = args.connect.admin()?;
    let outcome = broker(&admin, args.command, args.connect.json).await;
    admin.shutdown().await;
    outcome
}

async fn broker(admin: &MQAdmin, command: BrokerConfigCommand, json: bool) -> Result<()> {
    match command {
        BrokerConfigCommand::Get {
            broker,
            cluster,
            keys,
        } => {
            let mut all = BTreeMap::new();
            for addr in admin.target_addrs(&target(broker, cluster)).await? {
                let settings = admin.broker_config(&addr).await?;
                all.insert(addr, settings);
            }
            print_settings(all, &keys, json);
        }
        BrokerConfigCommand::Set {
            broker,
            cluster,
            settings,
        } => {
            let settings = parse_settings(&settings)?;
            let addrs = admin.target_addrs(&target(broker, cluster)).await?;
            for (done, addr) in addrs.iter().enumerate() {
                if let Err(e) = admin.update_broker_config(addr, &settings).await {
                    bail!("{}", refusal(addr, &settings, &addrs[..done], &e));
                }
            }
            report_set(&addrs, &settings, json);
        }
    }
    Ok(())
}

/// Why a broker did not take a `set`, said so an operator knows what to do: the broker's own
/// reason with its response code by name, that it changed nothing (its updates are all or
/// nothing), and which brokers of the same command did change.
fn refusal(
    addr: &str,
    settings: &BTreeMap<String, String>,
    already: &[String],
    error: &ClientError,
) -> String {
    let keys: Vec<&str> = settings.keys().map(String::as_str).collect();
    let mut text = match error {
        ClientError::Broker { code, remark, .. } => format!(
            "broker {addr} refused to change {}: {remark} ({} {code}); it changed nothing",
            keys.join(", "),
            ResponseCode::from_code(*code).name()
        ),
        other => format!(
            "could not change {} on broker {addr}: {other}",
            keys.join(", ")
        ),
    };
    if !already.is_empty() {
        text.push_str(&format!(
            "; already changed on {} (not undone)",
            already.join(", ")
        ));
    }
    text
}

/// What a `set` changed.
fn report_set(servers: &[String], settings: &BTreeMap<String, String>, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::json!({"updated": servers, "settings": settings})
        );
    } else {
        for s in servers {
            println!("update config of {s} success: {settings:?}");
        }
    }
}

/// Runs `comet namesrv-config`.
pub async fn run_namesrv(args: NamesrvConfigArgs) -> Result<()> {
    let admin = args.connect.admin()?;
    let outcome = namesrv(&admin, args.command, args.connect.json).await;
    admin.shutdown().await;
    outcome
}

async fn namesrv(admin: &MQAdmin, command: NamesrvConfigCommand, json: bool) -> Result<()> {
    match command {
        NamesrvConfigCommand::Get { keys } => {
            print_settings(admin.namesrv_config().await?, &keys, json);
        }
        NamesrvConfigCommand::Set { settings } => {
            let settings = parse_settings(&settings)?;
            let servers = admin.update_namesrv_config(&settings).await?;
            report_set(&servers, &settings, json);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_says_who_refused_what_and_why() {
        let settings = parse_settings(&["rocketmqHome=/x".to_owned()]).expect("parses");
        let error = ClientError::Broker {
            addr: "127.0.0.1:10911".to_owned(),
            code: 16,
            remark: "Can not update config in black list.".to_owned(),
        };
        let text = refusal("127.0.0.1:10911", &settings, &[], &error);
        assert_eq!(
            text,
            "broker 127.0.0.1:10911 refused to change rocketmqHome: Can not update config in \
             black list. (NO_PERMISSION 16); it changed nothing"
        );
        let text = refusal(
            "127.0.0.1:10921",
            &settings,
            &["127.0.0.1:10911".to_owned()],
            &error,
        );
        assert!(
            text.ends_with("; already changed on 127.0.0.1:10911 (not undone)"),
            "{text}"
        );
    }

    #[test]
    fn settings_need_a_key_and_an_equals_sign() {
        let parsed = parse_settings(&["a=1".to_owned(), " b = x y ".to_owned()]).expect("parses");
        assert_eq!(parsed.get("a").map(String::as_str), Some("1"));
        assert_eq!(parsed.get("b").map(String::as_str), Some("x y"));
        assert!(parse_settings(&["novalue".to_owned()]).is_err());
        assert!(parse_settings(&["=1".to_owned()]).is_err());
    }
}
