//! `comet msg by-key|by-id|by-unique-key|by-offset|print|trace|consume-directly` (mqadmin
//! `queryMsgByKey`, `queryMsgById`, `queryMsgByUniqueKey`, `queryMsgByOffset`, `printMsg`,
//! `queryMsgTraceById` and `queryMsgById -g -d`).

use anyhow::Result;
use clap::{Args, Subcommand};
use comet_client::admin::MQAdmin;
use comet_client::admin::message::DEFAULT_QUERY_MAX_NUM;
use comet_client::trace::{self, TraceContext, TraceType};

use super::{ConnectArgs, Table, format_millis, message_json, parse_time};

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
    /// Messages of a topic by their unique id (UNIQ_KEY, the id producers print).
    ByUniqueKey {
        /// Topic.
        topic: String,
        /// Unique message id.
        id: String,
    },
    /// The message at one offset of one queue.
    ByOffset {
        /// Topic.
        #[arg(short = 't', long)]
        topic: String,
        /// Broker name.
        #[arg(short = 'b', long)]
        broker: String,
        /// Queue id.
        #[arg(short = 'i', long = "queue")]
        queue: i32,
        /// Queue offset.
        #[arg(short = 'o', long)]
        offset: i64,
    },
    /// A topic's messages stored in a time window, queue by queue.
    Print {
        /// Topic.
        topic: String,
        /// Only messages stored at or after this time (default: each queue's first).
        #[arg(short = 's', long)]
        begin: Option<String>,
        /// Only messages stored before this time (default: each queue's end).
        #[arg(short = 'e', long)]
        end: Option<String>,
        /// Most messages to print.
        #[arg(long, default_value_t = super::msg_browse::DEFAULT_PRINT_MAX)]
        max: usize,
    },
    /// The trace records (Pub, SubBefore, SubAfter, EndTransaction) of a message, from the
    /// trace topic.
    Trace {
        /// Message id (the client id, UNIQ_KEY).
        #[arg(short = 'i', long = "id")]
        id: String,
        /// Trace topic.
        #[arg(long, default_value = comet_client::trace::RMQ_SYS_TRACE_TOPIC)]
        trace_topic: String,
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
            super::msg_browse::print_messages(&found, json);
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
                super::msg_browse::print_message_detail(&msg);
            }
        }
        MsgCommand::ByUniqueKey { topic, id } => {
            let found = admin.query_message_by_unique_key(&topic, &id).await?;
            if found.is_empty() {
                anyhow::bail!("no message of {topic} has the unique id {id}");
            }
            super::msg_browse::print_messages(&found, json);
        }
        MsgCommand::ByOffset {
            topic,
            broker,
            queue,
            offset,
        } => super::msg_browse::by_offset(admin, &topic, &broker, queue, offset, json).await?,
        MsgCommand::Print {
            topic,
            begin,
            end,
            max,
        } => {
            let begin = begin.as_deref().map(parse_time).transpose()?;
            let end = end.as_deref().map(parse_time).transpose()?;
            let found = admin.messages_in_window(&topic, begin, end, max).await?;
            super::msg_browse::print_messages(&found, json);
        }
        MsgCommand::Trace { id, trace_topic } => {
            let records = trace::query_traces(admin, &trace_topic, &id).await?;
            if records.is_empty() {
                anyhow::bail!("no trace of message {id} in {trace_topic}");
            }
            print_traces(&records, json);
        }
    }
    Ok(())
}

/// The records as a table (or JSON lines), in stored order.
fn print_traces(records: &[TraceContext], json: bool) {
    if json {
        for record in records {
            println!("{}", trace::record_json(record));
        }
        return;
    }
    let mut table = Table::new([
        "TYPE", "TIME", "GROUP", "COST_MS", "SUCCESS", "HOST", "DETAIL",
    ]);
    for record in records {
        let bean = record.beans.first().cloned().unwrap_or_default();
        let time = if record.time_stamp > 0 {
            format_millis(record.time_stamp)
        } else {
            String::new()
        };
        let detail = match record.trace_type {
            TraceType::Pub => format!(
                "topic={} tags={} keys={} msgType={} bodyLength={}",
                bean.topic,
                bean.tags.unwrap_or_default(),
                bean.keys.unwrap_or_default(),
                bean.msg_type.java_name(),
                bean.body_length
            ),
            TraceType::SubBefore => format!(
                "requestId={} retryTimes={}",
                record.request_id, bean.retry_times
            ),
            TraceType::SubAfter => format!(
                "requestId={} contextCode={}",
                record.request_id, record.context_code
            ),
            TraceType::EndTransaction => format!(
                "state={} transactionId={} fromCheck={}",
                bean.transaction_state.unwrap_or_default(),
                bean.transaction_id.unwrap_or_default(),
                bean.from_transaction_check
            ),
            TraceType::Recall => format!("topic={}", bean.topic),
        };
        table.row([
            record.trace_type.name().to_owned(),
            time,
            record.group_name.clone(),
            record.cost_time.to_string(),
            record.success.to_string(),
            bean.store_host,
            detail,
        ]);
    }
    table.print();
}
