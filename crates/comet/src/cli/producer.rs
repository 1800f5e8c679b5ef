//! `comet producer connections` (mqadmin `producerConnection`): the connections of a producer
//! group, asked of the brokers of a topic it sends to.

use anyhow::Result;
use clap::{Args, Subcommand};

use super::{ConnectArgs, Table};

/// Arguments of `comet producer`.
#[derive(Debug, Args)]
pub struct ProducerArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(subcommand)]
    pub command: ProducerCommand,
}

/// The `comet producer` subcommands.
#[derive(Debug, Subcommand)]
pub enum ProducerCommand {
    /// The online clients of a producer group.
    Connections {
        /// Producer group.
        #[arg(short = 'g', long)]
        group: String,
        /// A topic the group sends to (its brokers are asked).
        #[arg(short = 't', long)]
        topic: String,
    },
}

/// Runs `comet producer`.
pub async fn run(args: ProducerArgs) -> Result<()> {
    let admin = args.connect.admin()?;
    let json = args.connect.json;
    let ProducerCommand::Connections { group, topic } = args.command;
    let outcome = admin.producer_connections(&group, &topic).await;
    admin.shutdown().await;
    let conn = outcome?;
    if json {
        println!("{}", serde_json::to_string(&conn)?);
        return Ok(());
    }
    let mut table = Table::new(["CLIENT_ID", "ADDRESS", "LANGUAGE", "VERSION"]);
    for c in &conn.connection_set {
        table.row([
            c.client_id.clone(),
            c.client_addr.clone(),
            c.language.clone(),
            c.version.to_string(),
        ]);
    }
    table.print();
    Ok(())
}
