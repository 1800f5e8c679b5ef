//! The broker side: [`PlainAccessValidator`] checks every incoming request against
//! `plain_acl.yml` as a server [`RpcHook`], and reloads the file when it changes.
//!
//! Order of the checks, as RocketMQ's: global white list → AccessKey known → the account's white
//! list (skips the rest) → signature → admin-only codes → per-resource permissions. A refusal is
//! answered with NO_PERMISSION (16, RocketMQ 5.x; 4.9 answered SYSTEM_ERROR) and a remark that
//! names the access key and the rule, and is logged with the peer address.
//!
//! Resources per request code follow RocketMQ 4.9, with three additions where 4.9 leaves a hole
//! (each is a request 4.9 would let through unchecked): SEND_BATCH_MESSAGE is checked like
//! SEND_MESSAGE_V2, LITE_PULL_MESSAGE like PULL_MESSAGE, QUERY_CONSUMER_OFFSET like
//! UPDATE_CONSUMER_OFFSET.
//!
//! Signature variants accepted besides the exact Java one (each still needs the secret key):
//! content without `_UNIQUE_KEY_QUERY` (what 4.9 brokers verify), and content without
//! `SecurityToken` (what the Go client signs).
//!
//! Hot reload: [`PlainAccessValidator::spawn_watcher`] polls the file's modification time and
//! length; a changed file is compiled and swapped in atomically. A file that fails to compile is
//! logged and the previous table stays in force.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use comet_protocol::RemotingCommand;
use comet_protocol::body::heartbeat::HeartbeatData;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_remoting::{CancellationToken, RpcHook};
use parking_lot::{Mutex, RwLock};
use tokio::task::JoinHandle;

use crate::config::{Account, AclTable};
use crate::error::{AccessDenied, AclError};
use crate::permission::{PUB, SUB, check_permission, perm_name};
use crate::signature::{ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, UNIQUE_KEY_QUERY, verify_request};
use comet_protocol::naming::{RETRY_GROUP_TOPIC_PREFIX, TRACE_TOPIC, is_retry_topic, retry_topic};

/// How often the watcher looks at the file (RocketMQ watches its ACL files every 500 ms with a
/// content hash; a stat every couple of seconds is cheaper and quick enough for an operator).
pub const DEFAULT_WATCH_INTERVAL: Duration = Duration::from_secs(2);
/// Request codes that need `admin: true`: RocketMQ's admin resource map, plus the listing of the
/// ACL itself (GET_BROKER_CLUSTER_ACL_CONFIG), which names every account.
pub const ADMIN_ONLY_CODES: [RequestCode; 6] = [
    RequestCode::GetBrokerClusterAclConfig,
    RequestCode::UpdateAndCreateTopic,
    RequestCode::UpdateBrokerConfig,
    RequestCode::DeleteTopicInBroker,
    RequestCode::UpdateAndCreateSubscriptiongroup,
    RequestCode::DeleteSubscriptiongroup,
];

/// Skip lists tried in order when the exact signature does not match.
const SIGNATURE_VARIANTS: [&[&str]; 4] = [
    &[],
    &[UNIQUE_KEY_QUERY],
    &[SECURITY_TOKEN],
    &[UNIQUE_KEY_QUERY, SECURITY_TOKEN],
];

/// What identifies one version of the file on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
}

fn stamp(path: &Path) -> Option<FileStamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(FileStamp {
        modified: meta.modified().ok(),
        len: meta.len(),
    })
}

/// Checks requests against a `plain_acl.yml`. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct PlainAccessValidator {
    path: Option<PathBuf>,
    table: RwLock<Arc<AclTable>>,
    stamp: Mutex<Option<FileStamp>>,
}

impl PlainAccessValidator {
    /// Loads `path`; fails when the file is missing or invalid (a broker must not start with an
    /// ACL it cannot read).
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, AclError> {
        let path = path.into();
        let before = stamp(&path);
        let table = AclTable::load(&path)?;
        tracing::info!(file = %path.display(), accounts = table.accounts.len(), "ACL file loaded");
        Ok(PlainAccessValidator {
            path: Some(path),
            table: RwLock::new(Arc::new(table)),
            stamp: Mutex::new(before),
        })
    }

    /// A validator over a fixed table (no file, nothing to reload).
    pub fn from_table(table: AclTable) -> Self {
        PlainAccessValidator {
            path: None,
            table: RwLock::new(Arc::new(table)),
            stamp: Mutex::new(None),
        }
    }

    /// The table in force.
    pub fn table(&self) -> Arc<AclTable> {
        Arc::clone(&self.table.read())
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Reloads the file if its modification time or length changed. `Ok(true)`: a new table is
    /// in force. On error the previous table stays in force (and the same file version is not
    /// retried until it changes again).
    pub fn reload_if_changed(&self) -> Result<bool, AclError> {
        let Some(path) = &self.path else {
            return Ok(false);
        };
        let now = stamp(path);
        {
            let mut last = self.stamp.lock();
            if *last == now {
                return Ok(false);
            }
            *last = now;
        }
        let table = AclTable::load(path)?;
        tracing::info!(file = %path.display(), accounts = table.accounts.len(), "ACL file reloaded");
        *self.table.write() = Arc::new(table);
        Ok(true)
    }

    /// Polls the file every `interval` until `shutdown` is cancelled.
    pub fn spawn_watcher(
        self: &Arc<Self>,
        interval: Duration,
        shutdown: CancellationToken,
    ) -> JoinHandle<()> {
        let validator = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = ticker.tick() => {}
                }
                let v = Arc::clone(&validator);
                match tokio::task::spawn_blocking(move || v.reload_if_changed()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::error!(error = %e,
                        "ACL file changed but cannot be used; the previous ACL stays in force"),
                    Err(e) => tracing::error!(error = %e, "ACL reload task failed"),
                }
            }
        })
    }

    /// Checks one request from `remote`.
    pub fn validate(&self, remote: IpAddr, request: &RemotingCommand) -> Result<(), AccessDenied> {
        let table = self.table();
        if table
            .global_white_remote_addresses
            .iter()
            .any(|p| p.matches(remote))
        {
            return Ok(());
        }
        let code = request.code;
        let access_key = request
            .ext(ACCESS_KEY)
            .ok_or(AccessDenied::MissingAccessKey { code })?;
        let account =
            table
                .accounts
                .get(access_key)
                .ok_or_else(|| AccessDenied::UnknownAccessKey {
                    access_key: access_key.to_owned(),
                })?;
        if account.white_remote_address.matches(remote) {
            return Ok(());
        }
        let signature = request
            .ext(SIGNATURE)
            .ok_or_else(|| AccessDenied::MissingSignature {
                code,
                access_key: access_key.to_owned(),
            })?;
        let signed = SIGNATURE_VARIANTS.iter().any(|skip| {
            let relevant = skip.iter().all(|k| request.ext(k).is_some());
            relevant && verify_request(request, skip, &account.secret_key, signature)
        });
        if !signed {
            return Err(AccessDenied::BadSignature {
                code,
                access_key: access_key.to_owned(),
            });
        }
        check_permissions(account, request)
    }
}

/// The credentials of a 5.x gRPC request: its `authorization` header
/// (`MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time, Signature=<hex>`) and the
/// `x-mq-date-time` it signs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrpcCredentials {
    /// The `authorization` header, if sent.
    pub authorization: Option<String>,
    /// The `x-mq-date-time` header, if sent.
    pub date_time: Option<String>,
}

impl PlainAccessValidator {
    /// Checks one gRPC request from `remote` carrying `credentials` that needs `needed`
    /// ((resource, perm) pairs; groups as `%RETRY%group`). The signature is the HMAC-SHA1 of the
    /// date-time under the account's secret key, hex-encoded, compared in constant time; as on
    /// Apache's proxy there is no clock-skew check. `code` names the RPC in refusals.
    pub fn validate_grpc(
        &self,
        remote: IpAddr,
        credentials: &GrpcCredentials,
        code: i32,
        needed: &[(String, u8)],
    ) -> Result<(), AccessDenied> {
        let table = self.table();
        if table
            .global_white_remote_addresses
            .iter()
            .any(|p| p.matches(remote))
        {
            return Ok(());
        }
        let parsed = credentials
            .authorization
            .as_deref()
            .and_then(crate::signature::parse_grpc_authorization)
            .ok_or(AccessDenied::MissingAccessKey { code })?;
        let account = table.accounts.get(&parsed.access_key).ok_or_else(|| {
            AccessDenied::UnknownAccessKey {
                access_key: parsed.access_key.clone(),
            }
        })?;
        if account.white_remote_address.matches(remote) {
            return Ok(());
        }
        let date_time = credentials.date_time.as_deref().unwrap_or("");
        if !crate::signature::verify_hex(
            date_time.as_bytes(),
            &account.secret_key,
            &parsed.signature,
        ) {
            return Err(AccessDenied::BadSignature {
                code,
                access_key: parsed.access_key,
            });
        }
        check_resources(account, code, needed)
    }
}

fn check_permissions(account: &Account, request: &RemotingCommand) -> Result<(), AccessDenied> {
    let code = request.code;
    let request_code = RequestCode::from_code(code);
    if ADMIN_ONLY_CODES.contains(&request_code) && !account.admin {
        return Err(AccessDenied::NeedAdmin {
            code,
            access_key: account.access_key.clone(),
        });
    }
    let needed = needed_resources(request_code, request)?;
    check_resources(account, code, &needed)
}

/// Whether `account` holds every (resource, perm) of `needed`; `code` names the request in the
/// refusal. Admins without explicit permissions hold everything; the trace topic is always
/// writable.
fn check_resources(
    account: &Account,
    code: i32,
    needed: &[(String, u8)],
) -> Result<(), AccessDenied> {
    if account.admin && account.resource_perms.is_empty() {
        return Ok(());
    }
    for (resource, perm) in needed {
        let (resource, perm) = (resource.clone(), *perm);
        if resource == TRACE_TOPIC && perm == PUB {
            continue;
        }
        let is_group = resource.starts_with(RETRY_GROUP_TOPIC_PREFIX);
        let owned = account
            .resource_perms
            .get(&resource)
            .copied()
            .unwrap_or(if is_group {
                account.default_group_perm
            } else {
                account.default_topic_perm
            });
        if !check_permission(perm, owned) {
            let (kind, name) = match resource.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
                Some(group) => ("group", group.to_owned()),
                None => ("topic", resource.clone()),
            };
            return Err(AccessDenied::NoPermission {
                code,
                access_key: account.access_key.clone(),
                kind,
                resource: name,
                needed: perm_name(perm),
            });
        }
    }
    Ok(())
}

/// The (resource, needed perm) pairs `request` touches. A field the request lacks adds nothing:
/// such a request is refused by its processor anyway and cannot reach any resource.
fn needed_resources(
    code: RequestCode,
    request: &RemotingCommand,
) -> Result<Vec<(String, u8)>, AccessDenied> {
    let mut out = Vec::new();
    let mut add = |resource: Option<String>, perm: u8| {
        if let Some(resource) = resource {
            out.push((resource, perm));
        }
    };
    let field = |key: &str| request.ext(key).map(str::to_owned);
    let group_resource = |key: &str| request.ext(key).map(retry_topic);
    match code {
        RequestCode::SendMessage => match field("topic") {
            Some(t) if is_retry_topic(&t) => add(group_resource("group"), SUB),
            topic => add(topic, PUB),
        },
        RequestCode::SendMessageV2 | RequestCode::SendBatchMessage => match field("b") {
            Some(t) if is_retry_topic(&t) => add(group_resource("a"), SUB),
            topic => add(topic, PUB),
        },
        RequestCode::ConsumerSendMsgBack => {
            add(group_resource("group"), SUB);
            add(field("originTopic"), PUB);
        }
        RequestCode::PullMessage | RequestCode::LitePullMessage => {
            add(field("topic"), SUB);
            add(group_resource("consumerGroup"), SUB);
        }
        RequestCode::QueryMessage => add(field("topic"), SUB),
        RequestCode::HeartBeat => {
            let body = request.body.as_deref().unwrap_or_default();
            let heartbeat = HeartbeatData::decode(body).map_err(|e| AccessDenied::Unparsable {
                code: code.code(),
                reason: format!("heartbeat body: {e}"),
            })?;
            for consumer in &heartbeat.consumer_data_set {
                add(Some(retry_topic(&consumer.group_name)), SUB);
                for sub in &consumer.subscription_data_set {
                    add(Some(sub.topic.clone()), SUB);
                }
            }
        }
        RequestCode::UnregisterClient | RequestCode::GetConsumerListByGroup => {
            add(group_resource("consumerGroup"), SUB);
        }
        RequestCode::UpdateConsumerOffset | RequestCode::QueryConsumerOffset => {
            add(group_resource("consumerGroup"), SUB);
            add(field("topic"), SUB);
        }
        _ => {}
    }
    Ok(out)
}

impl RpcHook for PlainAccessValidator {
    fn before_request(
        &self,
        remote: SocketAddr,
        request: &mut RemotingCommand,
    ) -> Result<(), Box<RemotingCommand>> {
        self.validate(remote.ip(), request).map_err(|denied| {
            tracing::warn!(peer = %remote, code = request.code, reason = %denied, "request refused by ACL");
            Box::new(RemotingCommand::response(
                ResponseCode::NoPermission,
                Some(denied.to_string()),
            ))
        })
    }

    fn after_response(
        &self,
        _remote: SocketAddr,
        _request: &RemotingCommand,
        _response: &mut RemotingCommand,
    ) {
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_hook::{AclClientRpcHook, SessionCredentials};
    use comet_protocol::command::ExtFields;

    const FILE: &str =
        "accounts:\n  - accessKey: ak\n    secretKey: sk123456\n    defaultTopicPerm: PUB\n";

    fn localhost() -> IpAddr {
        IpAddr::from([127, 0, 0, 1])
    }

    fn signed_send(topic: &str, secret: &str) -> RemotingCommand {
        let mut ext = ExtFields::new();
        ext.insert("topic", topic);
        let mut req = RemotingCommand::request(RequestCode::SendMessage).with_ext_fields(ext);
        AclClientRpcHook::new(SessionCredentials::new("ak", secret)).sign_request(&mut req);
        req
    }

    #[test]
    fn reload_swaps_valid_files_and_keeps_the_old_table_on_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("plain_acl.yml");
        std::fs::write(&path, FILE).expect("write");
        let validator = PlainAccessValidator::open(&path).expect("open");
        assert_eq!(validator.reload_if_changed(), Ok(false), "unchanged file");
        assert!(
            validator
                .validate(localhost(), &signed_send("t", "sk123456"))
                .is_ok()
        );

        std::fs::write(&path, "accounts: [ [ broken").expect("write");
        assert!(validator.reload_if_changed().is_err());
        assert!(
            validator
                .validate(localhost(), &signed_send("t", "sk123456"))
                .is_ok(),
            "previous table stays in force"
        );
        assert_eq!(
            validator.reload_if_changed(),
            Ok(false),
            "same broken file not retried"
        );

        std::fs::write(&path, FILE.replace("sk123456", "newsecret99")).expect("write");
        assert_eq!(validator.reload_if_changed(), Ok(true));
        assert!(matches!(
            validator.validate(localhost(), &signed_send("t", "sk123456")),
            Err(AccessDenied::BadSignature { .. })
        ));
        assert!(
            validator
                .validate(localhost(), &signed_send("t", "newsecret99"))
                .is_ok()
        );
    }

    #[test]
    fn global_white_list_skips_everything_and_go_style_token_signing_is_accepted() {
        let table = AclTable::parse(&format!("globalWhiteRemoteAddresses: [ 10.0.0.* ]\n{FILE}"))
            .expect("parse");
        let validator = PlainAccessValidator::from_table(table);
        let bare = RemotingCommand::request(RequestCode::SendMessage);
        assert!(
            validator
                .validate(IpAddr::from([10, 0, 0, 9]), &bare)
                .is_ok()
        );
        assert!(matches!(
            validator.validate(localhost(), &bare),
            Err(AccessDenied::MissingAccessKey { .. })
        ));

        // The Go client sends SecurityToken but leaves it out of the signed content.
        let mut req = signed_send("t", "sk123456");
        req.ext_mut().insert(SECURITY_TOKEN, "token");
        assert!(validator.validate(localhost(), &req).is_ok());
    }

    #[test]
    fn trace_topic_publish_is_always_allowed() {
        let file =
            "accounts:\n  - accessKey: ak\n    secretKey: sk123456\n    defaultTopicPerm: DENY\n";
        let validator = PlainAccessValidator::from_table(AclTable::parse(file).expect("parse"));
        assert!(
            validator
                .validate(localhost(), &signed_send(TRACE_TOPIC, "sk123456"))
                .is_ok()
        );
        assert!(matches!(
            validator.validate(localhost(), &signed_send("other", "sk123456")),
            Err(AccessDenied::NoPermission { .. })
        ));
    }
}
