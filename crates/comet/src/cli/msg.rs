//! `comet msg by-key|by-id|consume-directly` (mqadmin `queryMsgByKey`, `queryMsgById`, and
//! `queryMsgById -g -d`).

use anyhow::Result;
use clap::{Args, Subcommand};
use comet_client::MessageExt;
use comet_client::admin::MQAdmin;
use comet_client::admin::message::DEFAULT_QUERY_MAX_NUM;

use super::{ConnectArgs, Table, format_millis, message_json, parse_time, printable_body};

#[derive(Debug, Args)]
pub struct MsgArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(subcommand)]
    pub command: MsgCommand,
}

#[derive(Debug, Subcommand)]
pub enum MsgCommand {
    /// Messages of a topic indexed under a key (the KEYS property).
    ByKey {
        /// Topic.
        topic: String,
        /// Message key.
        key: String,
        /// Most messages to show.
        #[arg(long, default_value_t = DEFAULT_QUERY_MAX_NUM)]
        max: i32,
        /// Only messages stored at or after this time.
        #[arg(long)]
        begin: Option<String>,
        /// Only messages stored before this time.
        #[arg(long)]
        end: Option<String>,
    },
    /// One message by its offset msgId or its unique id (UNIQ_KEY; needs --topic).
    ById {
        /// Message id.
        id: String,
        /// Topic (needed to look a unique id up).
        #[arg(short = 't', long)]
        topic: Option<String>,
    },
    /// Hand one stored message to one online push consumer's listener, once.
    ConsumeDirectly {
        /// Message id (offset msgId, or unique id with --topic).
        id: String,
        /// Consumer group.
        #[arg(short = 'g', long)]
        group: String,
        /// Client id of the consumer (see `comet group connections`).
        #[arg(short = 'd', long = "client")]
        client: String,
        /// Topic (needed to look a unique id up).
        #[arg(short = 't', long)]
        topic: Option<String>,
    },
}

pub async fn run(args: MsgArgs) -> Result<()> {
    let admin = args.connect.admin()?;
    let json = args.connect.json;
    let outcome = execute(&admin, args.command, json).await;
    admin.shutdown().await;
    outcome
}

async fn execute(admin: &MQAdmin, command: MsgCommand, json: bool) -> Result<()> {
    match command {
        MsgCommand::ByKey {
            topic,
            key,
            max,
            begin,
            end,
        } => {
            let begin = begin.as_deref().map(parse_time).transpose()?.unwrap_or(0);
            let end = end
                .as_deref()
                .map(parse_time)
                .transpose()?
                .unwrap_or(i64::MAX);
            let found = admin
                .query_message_by_key(&topic, &key, max, begin, end)
                .await?;
            if json {
                for m in &found {
                    println!("{}", message_json(m));
                }
                return Ok(());
            }
            let mut table = Table::new(["MSG_ID", "QID", "OFFSET", "STORE_TIME", "BODY"]);
            for m in &found {
                table.row([
                    m.msg_id(),
                    m.queue_id.to_string(),
                    m.queue_offset.to_string(),
                    format_millis(m.store_timestamp),
                    printable_body(&m.body),
                ]);
            }
            table.print();
        }
        MsgCommand::ConsumeDirectly {
            id,
            group,
            client,
            topic,
        } => {
            let result = admin
                .consume_message_directly(&group, &client, &id, topic.as_deref())
                .await?;
            if json {
                println!("{}", comet_protocol::body::to_standard_json(&result)?);
            } else {
                println!("{result}");
            }
        }
        MsgCommand::ById { id, topic } => {
            let (kind, msg) = admin.view_message(&id, topic.as_deref()).await?;
            if json {
                let mut value = message_json(&msg);
                if let Some(obj) = value.as_object_mut() {
                    obj.insert("idKind".to_owned(), format!("{kind:?}").into());
                }
                println!("{value}");
            } else {
                print_message_detail(&msg);
            }
        }
    }
    Ok(())
}

/// mqadmin-style detail of one message.
pub fn print_message_detail(msg: &MessageExt) {
    let mut table = Table::new(["FIELD", "VALUE"]);
    table.row(["Topic".to_owned(), msg.topic.clone()]);
    table.row(["Tags".to_owned(), msg.tags().unwrap_or("").to_owned()]);
    table.row(["Keys".to_owned(), msg.keys().collect::<Vec<_>>().join(" ")]);
    table.row(["Msg Id".to_owned(), msg.msg_id()]);
    table.row(["Offset Msg Id".to_owned(), msg.offset_msg_id()]);
    table.row(["Queue ID".to_owned(), msg.queue_id.to_string()]);
    table.row(["Queue Offset".to_owned(), msg.queue_offset.to_string()]);
    table.row([
        "CommitLog Offset".to_owned(),
        msg.commit_log_offset.to_string(),
    ]);
    table.row([
        "Reconsume Times".to_owned(),
        msg.reconsume_times.to_string(),
    ]);
    table.row([
        "Born Timestamp".to_owned(),
        format_millis(msg.born_timestamp),
    ]);
    table.row([
        "Store Timestamp".to_owned(),
        format_millis(msg.store_timestamp),
    ]);
    table.row(["Born Host".to_owned(), msg.born_host.to_string()]);
    table.row(["Store Host".to_owned(), msg.store_host.to_string()]);
    table.row(["System Flag".to_owned(), msg.sys_flag.to_string()]);
    let props: Vec<String> = msg
        .properties
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    table.row(["Properties".to_owned(), props.join(", ")]);
    table.row(["Body".to_owned(), printable_body(&msg.body)]);
    table.print();
}
