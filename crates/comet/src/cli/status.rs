//! `comet broker-status` (mqadmin `brokerStatus`): a broker's runtime figures, by broker address
//! or for every broker (masters and slaves) of the cluster the name servers know.

use anyhow::Result;
use clap::Args;
use comet_client::admin::MQAdmin;

use super::{ConnectArgs, Table};

#[derive(Debug, Args)]
pub struct BrokerStatusArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Broker address (`ip:port`); every broker the name servers know when absent.
    #[arg(short = 'b', long)]
    pub broker: Option<String>,
}

pub async fn run(args: BrokerStatusArgs) -> Result<()> {
    let admin = args.connect.admin()?;
    let outcome = execute(&admin, args.broker, args.connect.json).await;
    admin.shutdown().await;
    outcome
}

async fn execute(admin: &MQAdmin, broker: Option<String>, json: bool) -> Result<()> {
    let addrs = match broker {
        Some(addr) => vec![addr],
        None => admin
            .cluster_info()
            .await?
            .broker_addr_table
            .values()
            .flat_map(|b| b.broker_addrs.values().cloned())
            .collect(),
    };
    let mut all = serde_json::Map::new();
    for addr in addrs {
        let info = admin.broker_runtime_info(&addr).await?;
        if json {
            all.insert(addr, serde_json::to_value(&info)?);
        } else {
            let mut table = Table::new(["BROKER", "KEY", "VALUE"]);
            for (key, value) in info {
                table.row([addr.clone(), key, value]);
            }
            table.print();
        }
    }
    if json {
        println!("{}", serde_json::Value::Object(all));
    }
    Ok(())
}
