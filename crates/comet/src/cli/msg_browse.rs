//! `comet msg by-offset` and the message list printing `msg by-key`, `msg by-unique-key` and
//! `msg print` share.

use anyhow::{Result, bail};
use comet_client::MessageExt;
use comet_client::admin::MQAdmin;

use super::{Table, format_millis, message_json, printable_body};

/// Most messages `msg print` shows unless told otherwise.
pub const DEFAULT_PRINT_MAX: usize = 1000;

/// Messages as a table, or one JSON object per line.
pub fn print_messages(found: &[MessageExt], json: bool) {
    if json {
        for m in found {
            println!("{}", message_json(m));
        }
        return;
    }
    let mut table = Table::new([
        "MSG_ID",
        "QID",
        "OFFSET",
        "TAGS",
        "KEYS",
        "STORE_TIME",
        "BODY",
    ]);
    for m in found {
        table.row([
            m.msg_id(),
            m.queue_id.to_string(),
            m.queue_offset.to_string(),
            m.tags().unwrap_or("").to_owned(),
            m.keys().collect::<Vec<_>>().join(" "),
            format_millis(m.store_timestamp),
            printable_body(&m.body),
        ]);
    }
    table.print();
}

/// `msg by-offset`: the message at one queue offset, or an error when there is none.
pub async fn by_offset(
    admin: &MQAdmin,
    topic: &str,
    broker: &str,
    queue: i32,
    offset: i64,
    json: bool,
) -> Result<()> {
    let Some(msg) = admin
        .message_at_offset(topic, broker, queue, offset)
        .await?
    else {
        bail!("no message at offset {offset} of {topic} queue {queue} on {broker}");
    };
    if json {
        println!("{}", message_json(&msg));
    } else {
        print_message_detail(&msg);
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
