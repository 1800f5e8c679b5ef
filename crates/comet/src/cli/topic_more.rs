//! `comet topic list -c`, `topic cluster-list` and `topic update-perm` (mqadmin `topicList -c`,
//! `topicClusterList`, `updateTopicPerm`).

use anyhow::Result;
use comet_client::admin::MQAdmin;
use comet_protocol::body::perm;
use comet_protocol::naming::{DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};

use super::Table;

/// `topic list -c`: every topic but retry and dead-letter ones, with its clusters and the groups
/// that consume it. A topic whose route or groups cannot be read is listed without them.
pub async fn list_with_groups(admin: &MQAdmin, json: bool) -> Result<()> {
    let mut rows = Vec::new();
    for topic in admin.topic_list().await? {
        if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) || topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
        {
            continue;
        }
        let clusters = admin.topic_cluster_list(&topic).await.unwrap_or_default();
        let groups = admin
            .topic_consumer_groups(&topic)
            .await
            .unwrap_or_default();
        rows.push((topic, clusters, groups));
    }
    if json {
        let topics: Vec<_> = rows
            .iter()
            .map(|(t, c, g)| serde_json::json!({"topic": t, "clusters": c, "groups": g}))
            .collect();
        println!("{}", serde_json::json!({ "topics": topics }));
        return Ok(());
    }
    let mut table = Table::new(["CLUSTER", "TOPIC", "CONSUMER_GROUP"]);
    for (topic, clusters, groups) in &rows {
        let cluster = clusters.iter().cloned().collect::<Vec<_>>().join(",");
        if groups.is_empty() {
            table.row([cluster.as_str(), topic.as_str(), ""]);
        }
        for group in groups {
            table.row([cluster.as_str(), topic.as_str(), group.as_str()]);
        }
    }
    table.print();
    Ok(())
}

/// `topic cluster-list`.
pub async fn cluster_list(admin: &MQAdmin, topic: &str, json: bool) -> Result<()> {
    let clusters = admin.topic_cluster_list(topic).await?;
    if json {
        println!(
            "{}",
            serde_json::json!({"topic": topic, "clusters": clusters})
        );
    } else {
        for c in clusters {
            println!("{c}");
        }
    }
    Ok(())
}

/// `topic update-perm`.
pub async fn update_perm(admin: &MQAdmin, topic: &str, permission: i32, json: bool) -> Result<()> {
    let brokers = admin.update_topic_perm(topic, permission).await?;
    if json {
        println!(
            "{}",
            serde_json::json!({"topic": topic, "perm": permission, "brokers": brokers})
        );
    } else {
        for b in brokers {
            println!(
                "update topic {topic} perm to {} on {b} success",
                perm::to_text(permission)
            );
        }
    }
    Ok(())
}
