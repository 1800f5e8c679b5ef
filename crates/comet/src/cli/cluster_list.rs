//! `comet cluster-list` (mqadmin `clusterList`): every cluster's brokers from the name servers;
//! with `-m`, each broker's runtime figures too.

use anyhow::Result;
use clap::Args;
use comet_client::admin::MQAdmin;

use super::{ConnectArgs, Table};

/// Runtime figures `-m` shows in the table (the JSON carries them all).
const SHOWN_FIGURES: &[&str] = &[
    "brokerVersionDesc",
    "putMessageTimesTotal",
    "putMessageSizeTotal",
    "commitLogMaxOffset",
];

/// Arguments of `comet cluster-list`.
#[derive(Debug, Args)]
pub struct ClusterListArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Also ask each broker for its runtime figures.
    #[arg(short = 'm', long = "more")]
    pub more: bool,
    /// Only this cluster.
    #[arg(short = 'c', long)]
    pub cluster: Option<String>,
}

/// Runs `comet cluster-list`.
pub async fn run(args: ClusterListArgs) -> Result<()> {
    let admin = args.connect.admin()?;
    let outcome = execute(&admin, &args, args.connect.json).await;
    admin.shutdown().await;
    outcome
}

/// One broker process of the listing.
struct Row {
    cluster: String,
    broker_name: String,
    broker_id: i64,
    addr: String,
    figures: std::collections::BTreeMap<String, String>,
}

async fn execute(admin: &MQAdmin, args: &ClusterListArgs, json: bool) -> Result<()> {
    let info = admin.cluster_info().await?;
    let mut rows = Vec::new();
    let mut clusters: Vec<_> = info.cluster_addr_table.iter().collect();
    clusters.sort();
    for (cluster, names) in clusters {
        if args.cluster.as_ref().is_some_and(|c| c != cluster) {
            continue;
        }
        let mut names = names.clone();
        names.sort();
        for name in names {
            let Some(data) = info.broker_addr_table.get(&name) else {
                continue;
            };
            let mut addrs: Vec<_> = data.broker_addrs.iter().collect();
            addrs.sort();
            for (id, addr) in addrs {
                let figures = if args.more {
                    admin.broker_runtime_info(addr).await.unwrap_or_default()
                } else {
                    Default::default()
                };
                rows.push(Row {
                    cluster: cluster.clone(),
                    broker_name: name.clone(),
                    broker_id: *id,
                    addr: addr.clone(),
                    figures,
                });
            }
        }
    }
    if json {
        let brokers: Vec<_> = rows
            .iter()
            .map(|r| {
                let mut v = serde_json::json!({
                    "cluster": r.cluster, "brokerName": r.broker_name,
                    "brokerId": r.broker_id, "addr": r.addr,
                });
                if args.more {
                    v["runtime"] = serde_json::to_value(&r.figures).unwrap_or_default();
                }
                v
            })
            .collect();
        println!("{}", serde_json::json!({ "brokers": brokers }));
        return Ok(());
    }
    let mut header = vec!["CLUSTER", "BROKER", "ID", "ADDRESS"];
    if args.more {
        header.extend(SHOWN_FIGURES);
    }
    let mut table = Table::new(header);
    for r in &rows {
        let mut cells = vec![
            r.cluster.clone(),
            r.broker_name.clone(),
            r.broker_id.to_string(),
            r.addr.clone(),
        ];
        if args.more {
            cells.extend(
                SHOWN_FIGURES
                    .iter()
                    .map(|k| r.figures.get(*k).cloned().unwrap_or_default()),
            );
        }
        table.row(cells);
    }
    table.print();
    Ok(())
}
