//! `comet controller-admin meta|sync-state|elect` (mqadmin `getControllerMetaData`,
//! `getSyncStateSet`, `electMaster`): a controller quorum's leader, each broker group's master,
//! epochs and in-sync replicas, and a forced election.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use comet_client::admin::controller::ControllerAdmin;

use super::Table;

/// Arguments of `comet controller-admin`.
#[derive(Debug, Args)]
pub struct ControllerAdminArgs {
    /// Controller address(es), `;`-separated (a broker's `controllerAddr`).
    #[arg(
        short = 'a',
        long = "controller",
        env = "COMET_CONTROLLER_ADDR",
        global = true,
        default_value = "127.0.0.1:9878"
    )]
    pub controllers: String,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: ControllerAdminCommand,
}

/// The `comet controller-admin` subcommands.
#[derive(Debug, Subcommand)]
pub enum ControllerAdminCommand {
    /// Each controller's view of the quorum: its name, the leader, the peers.
    Meta,
    /// Broker groups' masters, epochs and replicas (in the SyncStateSet or not, alive or not).
    SyncState {
        /// Broker names (`brokerName`), one or more.
        #[arg(required = true)]
        broker_names: Vec<String>,
    },
    /// Make a replica of the SyncStateSet the group's master (a forced failover).
    Elect {
        /// Cluster name.
        #[arg(short = 'c', long)]
        cluster: String,
        /// Broker name (the group).
        #[arg(short = 'b', long = "broker-name")]
        broker_name: String,
        /// The controller's id of the broker to elect (see `sync-state`).
        #[arg(short = 'i', long = "broker-id")]
        broker_id: i64,
    },
}

const TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `comet controller-admin`.
pub async fn run(args: ControllerAdminArgs) -> Result<()> {
    let admin = ControllerAdmin::new(&args.controllers, TIMEOUT)?;
    let outcome = match &args.command {
        ControllerAdminCommand::Meta => meta(&admin, args.json).await,
        ControllerAdminCommand::SyncState { broker_names } => {
            sync_state(&admin, broker_names, args.json).await
        }
        ControllerAdminCommand::Elect {
            cluster,
            broker_name,
            broker_id,
        } => elect(&admin, cluster, broker_name, *broker_id, args.json).await,
    };
    admin.shutdown().await;
    outcome
}

async fn meta(admin: &ControllerAdmin, json: bool) -> Result<()> {
    let mut rows = Vec::new();
    let mut failures = 0;
    for addr in admin.controllers() {
        match admin.metadata(addr).await {
            Ok(m) => rows.push(m),
            Err(e) => {
                failures += 1;
                eprintln!("controller {addr}: {e}");
            }
        }
    }
    if rows.is_empty() {
        bail!(
            "no controller of {} answered",
            admin.controllers().join(";")
        );
    }
    if json {
        let out: Vec<_> = rows
            .iter()
            .map(|m| {
                serde_json::json!({
                    "controller": m.addr, "group": m.group, "leaderId": m.leader_id,
                    "leaderAddress": m.leader_addr, "isLeader": m.is_leader, "peers": m.peers,
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(out));
    } else {
        let mut table = Table::new([
            "CONTROLLER",
            "GROUP",
            "LEADER_ID",
            "LEADER_ADDRESS",
            "IS_LEADER",
            "PEERS",
        ]);
        for m in rows {
            let dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
            table.row([
                m.addr,
                dash(m.group),
                dash(m.leader_id),
                dash(m.leader_addr),
                m.is_leader.to_string(),
                dash(m.peers),
            ]);
        }
        table.print();
    }
    if failures > 0 {
        bail!("{failures} controller(s) did not answer");
    }
    Ok(())
}

async fn sync_state(admin: &ControllerAdmin, names: &[String], json: bool) -> Result<()> {
    let info = admin
        .sync_state(names)
        .await
        .context("reading the SyncStateSets")?;
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !info.replicas_info_table.contains_key(*n))
        .collect();
    if json {
        println!("{}", serde_json::to_string(&info)?);
    } else {
        let mut table = Table::new([
            "BROKER_NAME",
            "BROKER_ID",
            "ADDRESS",
            "ROLE",
            "IN_SYNC",
            "ALIVE",
            "MASTER_EPOCH",
            "SYNC_STATE_SET_EPOCH",
        ]);
        for (name, group) in &info.replicas_info_table {
            let replicas = group
                .in_sync_replicas
                .iter()
                .map(|r| (r, true))
                .chain(group.not_in_sync_replicas.iter().map(|r| (r, false)));
            for (replica, in_sync) in replicas {
                let role = if Some(replica.broker_id) == group.master_broker_id {
                    "master"
                } else {
                    "slave"
                };
                table.row([
                    name.clone(),
                    replica.broker_id.to_string(),
                    replica.broker_address.clone(),
                    role.to_owned(),
                    in_sync.to_string(),
                    replica.alive.to_string(),
                    group.master_epoch.to_string(),
                    group.sync_state_set_epoch.to_string(),
                ]);
            }
        }
        table.print();
    }
    if !missing.is_empty() {
        bail!("the controllers know no broker group named {missing:?}");
    }
    Ok(())
}

async fn elect(
    admin: &ControllerAdmin,
    cluster: &str,
    broker_name: &str,
    broker_id: i64,
    json: bool,
) -> Result<()> {
    let elected = admin
        .elect_master(cluster, broker_name, broker_id)
        .await
        .with_context(|| format!("electing broker {broker_id} of {broker_name}"))?;
    if json {
        println!(
            "{}",
            serde_json::json!({
                "brokerName": broker_name, "masterBrokerId": elected.master_broker_id,
                "masterAddress": elected.master_address, "masterEpoch": elected.master_epoch,
                "syncStateSetEpoch": elected.sync_state_set_epoch,
                "syncStateSet": elected.body.sync_state_set,
            })
        );
        return Ok(());
    }
    let mut table = Table::new([
        "BROKER_NAME",
        "MASTER_ID",
        "MASTER_ADDRESS",
        "MASTER_EPOCH",
        "SYNC_STATE_SET_EPOCH",
    ]);
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
    table.row([
        broker_name.to_owned(),
        dash(elected.master_broker_id.map(|v| v.to_string())),
        dash(elected.master_address),
        dash(elected.master_epoch.map(|v| v.to_string())),
        dash(elected.sync_state_set_epoch.map(|v| v.to_string())),
    ]);
    table.print();
    Ok(())
}
