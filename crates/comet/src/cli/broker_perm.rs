//! `comet broker-perm wipe-write|add-write` (mqadmin `wipeWritePerm`, `addWritePerm`): take a
//! broker's write permission out of the name servers' routes, so producers stop sending to it
//! (before maintenance), and give it back.

use anyhow::Result;
use clap::{Args, Subcommand};

use super::{ConnectArgs, Table};

/// Arguments of `comet broker-perm`.
#[derive(Debug, Args)]
pub struct BrokerPermArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(subcommand)]
    pub command: BrokerPermCommand,
}

/// The `comet broker-perm` subcommands.
#[derive(Debug, Subcommand)]
pub enum BrokerPermCommand {
    /// Remove the broker's write permission in every name server's routes.
    WipeWrite {
        /// Broker name (not address).
        broker_name: String,
    },
    /// Give the broker's write permission back in every name server's routes.
    AddWrite {
        /// Broker name (not address).
        broker_name: String,
    },
}

/// Runs `comet broker-perm`.
pub async fn run(args: BrokerPermArgs) -> Result<()> {
    let admin = args.connect.admin()?;
    let (action, outcome) = match &args.command {
        BrokerPermCommand::WipeWrite { broker_name } => {
            ("wipe", admin.wipe_write_perm(broker_name).await)
        }
        BrokerPermCommand::AddWrite { broker_name } => {
            ("add", admin.add_write_perm(broker_name).await)
        }
    };
    admin.shutdown().await;
    let counts = outcome?;
    let (BrokerPermCommand::WipeWrite { broker_name }
    | BrokerPermCommand::AddWrite { broker_name }) = &args.command;
    if args.connect.json {
        println!(
            "{}",
            serde_json::json!({"brokerName": broker_name, "action": action, "topicCounts": counts})
        );
        return Ok(());
    }
    let mut table = Table::new(["NAMESRV", "BROKER", "TOPICS_CHANGED"]);
    for (namesrv, count) in counts {
        table.row([namesrv, broker_name.clone(), count.to_string()]);
    }
    table.print();
    Ok(())
}
