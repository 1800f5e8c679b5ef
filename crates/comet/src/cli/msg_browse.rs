//! `comet msg by-offset` and the message list printing `msg by-key`, `msg by-unique-key` and
//! `msg print` share.

use anyhow::{Result, bail};
use comet_client::MessageExt;
use comet_client::admin::MQAdmin;

use super::msg::print_message_detail;
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
