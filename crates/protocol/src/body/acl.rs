//! GET_BROKER_CLUSTER_ACL_CONFIG's body (RocketMQ 4.x ACL 1.0): the broker's `plain_acl.yml` as
//! its global white list and one entry per account.

use serde::{Deserialize, Serialize};

/// One account of `plain_acl.yml`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlainAccessConfig {
    #[serde(default)]
    pub access_key: String,
    /// Comet's broker never sends the secret: it answers `******`.
    #[serde(default)]
    pub secret_key: String,
    #[serde(default)]
    pub white_remote_address: String,
    #[serde(default)]
    pub admin: bool,
    #[serde(default)]
    pub default_topic_perm: String,
    #[serde(default)]
    pub default_group_perm: String,
    /// `topic=PERM` entries, as written in the file.
    #[serde(default)]
    pub topic_perms: Vec<String>,
    /// `group=PERM` entries, as written in the file.
    #[serde(default)]
    pub group_perms: Vec<String>,
}

/// GET_BROKER_CLUSTER_ACL_CONFIG response body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AclConfigBody {
    #[serde(default)]
    pub global_white_addrs: Vec<String>,
    #[serde(default)]
    pub plain_access_configs: Vec<PlainAccessConfig>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_are_java_s() {
        let body = AclConfigBody {
            global_white_addrs: vec!["10.0.0.*".to_owned()],
            plain_access_configs: vec![PlainAccessConfig {
                access_key: "ak".to_owned(),
                topic_perms: vec!["T=PUB".to_owned()],
                ..Default::default()
            }],
        };
        let json = serde_json::to_string(&body).unwrap();
        for key in [
            "globalWhiteAddrs",
            "plainAccessConfigs",
            "accessKey",
            "secretKey",
            "whiteRemoteAddress",
            "defaultTopicPerm",
            "defaultGroupPerm",
            "topicPerms",
            "groupPerms",
        ] {
            assert!(json.contains(&format!("\"{key}\"")), "{key}: {json}");
        }
    }
}
