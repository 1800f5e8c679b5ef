//! `plain_acl.yml`: parsing and compiling it into the table the validator consults.
//!
//! The file is compiled once per (re)load into an [`AclTable`]: address patterns parsed, perm
//! strings turned into bytes, group names turned into their `%RETRY%` resources. Requests then
//! only do map lookups, and a broken file is rejected as a whole at load time — a half-applied
//! ACL is worse than the previous one, so hot reload keeps the old table when the new file fails.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use crate::error::AclError;
use crate::permission::parse_perm;
use crate::remote_address::AddressPattern;
// A group's permission is stored under its retry topic's name.
use comet_protocol::naming::retry_topic;

/// Largest `plain_acl.yml` accepted: a bound on what a (possibly hostile) file makes the broker
/// allocate; real files are a few kilobytes.
pub const MAX_ACL_FILE_BYTES: u64 = 1024 * 1024;

/// A YAML scalar read as text, as RocketMQ does: `secretKey: 12345678` is the string "12345678".
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Scalar {
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Scalar {
    fn into_text(self) -> String {
        match self {
            Scalar::Text(s) => s,
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Bool(b) => b.to_string(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawFile {
    #[serde(default)]
    global_white_remote_addresses: Option<Vec<Scalar>>,
    #[serde(default)]
    accounts: Option<Vec<RawAccount>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawAccount {
    access_key: Option<Scalar>,
    secret_key: Option<Scalar>,
    white_remote_address: Option<Scalar>,
    admin: Option<Scalar>,
    default_topic_perm: Option<Scalar>,
    default_group_perm: Option<Scalar>,
    topic_perms: Option<Vec<Scalar>>,
    group_perms: Option<Vec<Scalar>>,
}

/// One compiled account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub access_key: String,
    pub secret_key: String,
    /// A matching peer skips signature and permission checks.
    pub white_remote_address: AddressPattern,
    pub admin: bool,
    pub default_topic_perm: u8,
    pub default_group_perm: u8,
    /// Explicit perms: topic name → perm, and `%RETRY%group` → perm for groups.
    pub resource_perms: HashMap<String, u8>,
}

/// The secret every listing shows instead of an account's secret key.
pub const MASKED_SECRET: &str = "******";

/// `plain_acl.yml` as written (GET_BROKER_CLUSTER_ACL_CONFIG): the global white list and every
/// account with its permissions as text. Secret keys are never listed: each shows
/// [`MASKED_SECRET`].
pub fn listing(text: &str) -> Result<comet_protocol::body::acl::AclConfigBody, AclError> {
    use comet_protocol::body::acl::{AclConfigBody, PlainAccessConfig};
    // Validate first: a file the broker would refuse is not listed as if it applied.
    AclTable::parse(text)?;
    let raw: RawFile = if text.trim().is_empty() {
        RawFile::default()
    } else {
        serde_yaml_ng::from_str::<Option<RawFile>>(text)
            .map_err(|e| AclError::Yaml(e.to_string()))?
            .unwrap_or_default()
    };
    let texts = |list: Option<Vec<Scalar>>| -> Vec<String> {
        list.unwrap_or_default()
            .into_iter()
            .map(Scalar::into_text)
            .collect()
    };
    let text_of = |v: Option<Scalar>| v.map(Scalar::into_text).unwrap_or_default();
    let plain_access_configs = raw
        .accounts
        .unwrap_or_default()
        .into_iter()
        .map(|a| PlainAccessConfig {
            access_key: text_of(a.access_key),
            secret_key: MASKED_SECRET.to_owned(),
            white_remote_address: text_of(a.white_remote_address),
            admin: text_of(a.admin).trim() == "true",
            default_topic_perm: text_of(a.default_topic_perm),
            default_group_perm: text_of(a.default_group_perm),
            topic_perms: texts(a.topic_perms),
            group_perms: texts(a.group_perms),
        })
        .collect();
    Ok(AclConfigBody {
        global_white_addrs: texts(raw.global_white_remote_addresses),
        plain_access_configs,
    })
}

/// A compiled `plain_acl.yml`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AclTable {
    pub global_white_remote_addresses: Vec<AddressPattern>,
    pub accounts: HashMap<String, Account>,
}

/// The text of `path`, bounded by [`MAX_ACL_FILE_BYTES`].
pub fn read_file(path: &Path) -> Result<String, AclError> {
    let read_error = |reason: String| AclError::Read {
        path: path.to_owned(),
        reason,
    };
    let len = std::fs::metadata(path)
        .map_err(|e| read_error(e.to_string()))?
        .len();
    if len > MAX_ACL_FILE_BYTES {
        return Err(AclError::TooLarge {
            path: path.to_owned(),
            len,
            max: MAX_ACL_FILE_BYTES,
        });
    }
    std::fs::read_to_string(path).map_err(|e| read_error(e.to_string()))
}

impl AclTable {
    /// Reads and compiles `path` (bounded by [`MAX_ACL_FILE_BYTES`]).
    pub fn load(path: &Path) -> Result<Self, AclError> {
        Self::parse(&read_file(path)?)
    }

    /// Compiles the text of a `plain_acl.yml`.
    pub fn parse(text: &str) -> Result<Self, AclError> {
        let raw: RawFile = if text.trim().is_empty() {
            RawFile::default()
        } else {
            serde_yaml_ng::from_str::<Option<RawFile>>(text)
                .map_err(|e| AclError::Yaml(e.to_string()))?
                .unwrap_or_default()
        };
        let global_white_remote_addresses = raw
            .global_white_remote_addresses
            .unwrap_or_default()
            .into_iter()
            .map(|p| AddressPattern::parse(&p.into_text()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut accounts = HashMap::new();
        for (index, raw) in raw.accounts.unwrap_or_default().into_iter().enumerate() {
            let account = compile_account(index, raw)?;
            if accounts.contains_key(&account.access_key) {
                return Err(AclError::Account {
                    index,
                    reason: format!("accessKey {} is declared twice", account.access_key),
                });
            }
            accounts.insert(account.access_key.clone(), account);
        }
        Ok(AclTable {
            global_white_remote_addresses,
            accounts,
        })
    }
}

fn compile_account(index: usize, raw: RawAccount) -> Result<Account, AclError> {
    let fail = |reason: String| AclError::Account { index, reason };
    let access_key = raw
        .access_key
        .map(Scalar::into_text)
        .filter(|k| !k.trim().is_empty())
        .ok_or_else(|| fail("accessKey is missing or blank".to_owned()))?;
    let secret_key = raw
        .secret_key
        .map(Scalar::into_text)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| {
            fail(format!(
                "accessKey {access_key}: secretKey is missing or empty"
            ))
        })?;
    let white_remote_address = match raw.white_remote_address {
        Some(p) => AddressPattern::parse(&p.into_text())?,
        None => AddressPattern::nothing(),
    };
    let admin = match raw.admin.map(Scalar::into_text) {
        None => false,
        Some(text) => match text.trim() {
            "true" => true,
            "false" | "" => false,
            other => {
                return Err(fail(format!(
                    "accessKey {access_key}: admin must be true or false, not {other:?}"
                )));
            }
        },
    };
    let default_topic_perm = parse_perm(raw.default_topic_perm.map(Scalar::into_text).as_deref());
    let default_group_perm = parse_perm(raw.default_group_perm.map(Scalar::into_text).as_deref());
    let mut resource_perms = HashMap::new();
    for entry in raw.topic_perms.unwrap_or_default() {
        let (topic, perm) = split_perm_entry(&entry.into_text())
            .map_err(|r| fail(format!("accessKey {access_key}: topicPerms {r}")))?;
        resource_perms.insert(topic, perm);
    }
    for entry in raw.group_perms.unwrap_or_default() {
        let (group, perm) = split_perm_entry(&entry.into_text())
            .map_err(|r| fail(format!("accessKey {access_key}: groupPerms {r}")))?;
        resource_perms.insert(retry_topic(&group), perm);
    }
    Ok(Account {
        access_key,
        secret_key,
        white_remote_address,
        admin,
        default_topic_perm,
        default_group_perm,
        resource_perms,
    })
}

/// `name=PERM` → (name, perm byte).
fn split_perm_entry(entry: &str) -> Result<(String, u8), String> {
    let (name, perm) = entry
        .split_once('=')
        .ok_or_else(|| format!("entry {entry:?} is not name=PERM"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("entry {entry:?} has an empty name"));
    }
    Ok((name.to_owned(), parse_perm(Some(perm))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permission::{DENY, PUB, SUB};

    const SAMPLE: &str = r#"
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: "12345678"
    whiteRemoteAddress: 192.168.1.*
    admin: true
"#;

    #[test]
    fn the_listing_shows_the_file_as_written_without_secrets() {
        let listed = listing(SAMPLE).expect("lists");
        assert_eq!(listed.global_white_addrs, ["10.10.103.*", "192.168.0.*"]);
        let first = &listed.plain_access_configs[0];
        assert_eq!(first.access_key, "RocketMQ");
        assert_eq!(first.secret_key, MASKED_SECRET);
        assert_eq!(first.default_group_perm, "SUB");
        assert_eq!(
            first.topic_perms,
            ["topicA=DENY", "topicB=PUB|SUB", "topicC=SUB"]
        );
        let second = &listed.plain_access_configs[1];
        assert!(second.admin);
        assert_eq!(second.white_remote_address, "192.168.1.*");
        assert!(!format!("{listed:?}").contains("12345678"));
        assert!(
            listing("accounts:\n  - accessKey: x\n").is_err(),
            "a broken file is refused"
        );
    }

    #[test]
    fn parses_the_rocketmq_sample_file() {
        let table = AclTable::parse(SAMPLE).unwrap_or_default();
        assert_eq!(table.global_white_remote_addresses.len(), 2);
        assert_eq!(table.accounts.len(), 2);
        let a = &table.accounts["RocketMQ"];
        assert_eq!(a.secret_key, "12345678", "numeric YAML scalar read as text");
        assert!(!a.admin);
        assert_eq!(a.default_topic_perm, DENY);
        assert_eq!(a.default_group_perm, SUB);
        assert_eq!(a.resource_perms["topicB"], PUB | SUB);
        assert_eq!(a.resource_perms["topicC"], SUB);
        assert_eq!(a.resource_perms["%RETRY%groupA"], DENY);
        assert!(
            !a.white_remote_address.matches(
                "192.168.1.1"
                    .parse()
                    .unwrap_or(std::net::IpAddr::from([0, 0, 0, 0]))
            )
        );
        let b = &table.accounts["rocketmq2"];
        assert!(b.admin);
        assert!(b.resource_perms.is_empty());
        assert_eq!(b.default_topic_perm, DENY, "missing default perm is DENY");
    }

    #[test]
    fn rejects_broken_files() {
        for bad in [
            "accounts:\n  - secretKey: x\n",
            "accounts:\n  - accessKey: a\n",
            "accounts:\n  - accessKey: a\n    secretKey: b\n    topicPerms: [noequals]\n",
            "accounts:\n  - accessKey: a\n    secretKey: b\n    admin: yes please\n",
            "accounts:\n  - accessKey: a\n    secretKey: b\n  - accessKey: a\n    secretKey: c\n",
            "globalWhiteRemoteAddresses: [ 10.1 ]\n",
            "accounts: [ [ ",
        ] {
            assert!(AclTable::parse(bad).is_err(), "{bad:?} must be rejected");
        }
        assert_eq!(AclTable::parse("").ok(), Some(AclTable::default()));
    }
}
