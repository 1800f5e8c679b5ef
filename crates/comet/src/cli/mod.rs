//! Client-side subcommands of the `comet` binary: `produce`, `consume`, `topic`, `group`, `msg`,
//! `producer`, `broker-status`, `cluster-list`, `broker-config`, `broker-perm`, `namesrv-config`
//! and `stats-all` (mqadmin's daily commands; docs/operations.md maps one to the other).
//!
//! They are thin shells over `comet-client` (the producer, the lite pull consumer and
//! [`comet_client::admin::MQAdmin`]), so they work against a Comet broker and an Apache RocketMQ
//! cluster alike, and use mqadmin's vocabulary where it fits (`-n` for the name server, `-c`
//! cluster, `-b` broker, `-g` group, `-t` topic). Output is a readable table by default and JSON
//! (one object per line for streams) with `--json`, so scripts need not parse tables.
//!
//! One module per command group; this one holds what they share: the name-server argument, the
//! table printer and time formatting.

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use clap::Args;
use comet_client::admin::MQAdmin;
use comet_client::{ClientConfig, SessionCredentials};
use comet_protocol::time::{civil_from_days, days_from_civil};

pub mod broker_perm;
pub mod cluster_list;
pub mod config;
pub mod consume;
pub mod controller_admin;
pub mod errors;
pub mod group;
pub mod group_admin;
pub mod group_stats;
pub mod group_status;
pub mod msg;
pub mod msg_browse;
pub mod produce;
pub mod producer;
pub mod stats_all;
pub mod status;
pub mod topic;
pub mod topic_more;

/// Name server used when neither `--namesrv` nor `NAMESRV_ADDR` is given.
pub const DEFAULT_NAMESRV: &str = "127.0.0.1:9876";
/// Longest body text printed per message; longer bodies are cut with an ellipsis.
pub const MAX_PRINTED_BODY: usize = 120;

/// Connection options every client subcommand takes.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// Name server address(es), `;`-separated.
    #[arg(short = 'n', long = "namesrv", env = "NAMESRV_ADDR", default_value = DEFAULT_NAMESRV, global = true)]
    pub namesrv: String,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// AccessKey of a `plain_acl.yml` account: every request is signed with it (for brokers
    /// with `aclEnable=true`). Needs `--secret-key`.
    #[arg(long, env = "COMET_ACCESS_KEY", global = true, requires = "secret_key")]
    pub access_key: Option<String>,
    /// SecretKey of the `--access-key` account.
    #[arg(long, env = "COMET_SECRET_KEY", global = true, hide_env_values = true)]
    pub secret_key: Option<String>,
}

impl ConnectArgs {
    /// A client configuration for these name servers.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new(self.namesrv.clone());
        if let (Some(access_key), Some(secret_key)) = (&self.access_key, &self.secret_key) {
            config.credentials = Some(SessionCredentials::new(access_key, secret_key));
        }
        config
    }

    /// An admin client for these name servers.
    pub fn admin(&self) -> Result<MQAdmin> {
        MQAdmin::new(self.client_config()).context("creating the admin client")
    }
}

/// A plain-text table: a header row and left-aligned columns separated by two spaces.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<I, S>(header: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: ToString,
    {
        self.rows
            .push(cells.into_iter().map(|c| c.to_string()).collect());
    }

    /// The rendered table, one line per row, with a trailing newline.
    pub fn render(&self) -> String {
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .chain(std::iter::once(self.header.len()))
            .max()
            .unwrap_or(0);
        let mut widths = vec![0usize; columns];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                let width = widths.get(i).copied().unwrap_or(0);
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let _ = write!(line, "{cell:<width$}  ");
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    pub fn print(&self) {
        print!("{}", self.render());
    }
}

/// `YYYY-MM-DD HH:MM:SS.mmm` (UTC) of a millisecond timestamp; `-` for 0.
pub fn format_millis(ms: i64) -> String {
    if ms <= 0 {
        return "-".to_owned();
    }
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{millis:03}",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// Parses a point in time: milliseconds since the epoch, `yyyyMMddHHmmss` (mqadmin's form), or
/// `YYYY-MM-DD[ T]HH:MM:SS`, the last two in UTC.
pub fn parse_time(text: &str) -> Result<i64> {
    let t = text.trim();
    let digits = t.chars().all(|c| c.is_ascii_digit());
    if digits && t.len() != 14 {
        return t
            .parse::<i64>()
            .with_context(|| format!("timestamp {t:?} is not a number of milliseconds"));
    }
    let compact: String = t.chars().filter(char::is_ascii_digit).collect();
    if compact.len() != 14 {
        bail!(
            "cannot read the time {t:?}: use epoch milliseconds, yyyyMMddHHmmss or YYYY-MM-DD HH:MM:SS (UTC)"
        );
    }
    let field = |range: std::ops::Range<usize>| -> Result<i64> {
        compact
            .get(range)
            .and_then(|s| s.parse::<i64>().ok())
            .with_context(|| format!("cannot read the time {t:?}"))
    };
    let (year, month, day) = (field(0..4)?, field(4..6)?, field(6..8)?);
    let (hour, minute, second) = (field(8..10)?, field(10..12)?, field(12..14)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 59
    {
        bail!("the time {t:?} is out of range");
    }
    let days = days_from_civil(year, month, day);
    Ok(((days * 86_400 + hour * 3600 + minute * 60 + second) * 1000).max(0))
}

/// A body as printable text: UTF-8 (lossy), control characters escaped, cut at
/// [`MAX_PRINTED_BODY`] characters.
pub fn printable_body(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out: String = text
        .chars()
        .take(MAX_PRINTED_BODY)
        .flat_map(char::escape_debug)
        .collect();
    if text.chars().count() > MAX_PRINTED_BODY {
        out.push('…');
    }
    out
}

/// One message as a JSON object (for `--json` output).
pub fn message_json(msg: &comet_client::MessageExt) -> serde_json::Value {
    let properties: serde_json::Map<String, serde_json::Value> = msg
        .properties
        .iter()
        .map(|(k, v)| (k.to_owned(), serde_json::Value::String(v.to_owned())))
        .collect();
    serde_json::json!({
        "msgId": msg.msg_id(),
        "offsetMsgId": msg.offset_msg_id(),
        "topic": msg.topic,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "tags": msg.tags(),
        "keys": msg.keys().collect::<Vec<_>>(),
        "bornTimestamp": msg.born_timestamp,
        "storeTimestamp": msg.store_timestamp,
        "storeHost": msg.store_host.to_string(),
        "reconsumeTimes": msg.reconsume_times,
        "properties": properties,
        "body": String::from_utf8_lossy(&msg.body),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_round_trip() {
        let ms = parse_time("2024-02-29 13:45:07").expect("parses");
        assert_eq!(format_millis(ms), "2024-02-29 13:45:07.000");
        assert_eq!(parse_time("20240229134507").expect("parses"), ms);
        assert_eq!(
            parse_time("1700000000123").expect("parses"),
            1_700_000_000_123
        );
        assert_eq!(format_millis(1_700_000_000_123), "2023-11-14 22:13:20.123");
        assert!(parse_time("2024-13-01 00:00:00").is_err());
        assert!(parse_time("yesterday").is_err());
    }

    #[test]
    fn table_aligns_columns() {
        let mut t = Table::new(["A", "LONGER"]);
        t.row(["xyz", "1"]);
        t.row(["q", "22"]);
        assert_eq!(t.render(), "A    LONGER\nxyz  1\nq    22\n");
    }

    #[test]
    fn body_is_escaped_and_cut() {
        assert_eq!(printable_body(b"a\nb"), "a\\nb");
        let long = vec![b'x'; MAX_PRINTED_BODY + 5];
        let shown = printable_body(&long);
        assert!(shown.ends_with('…'));
        assert_eq!(shown.chars().count(), MAX_PRINTED_BODY + 1);
    }
}
