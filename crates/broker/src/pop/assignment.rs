//! QUERY_ASSIGNMENT (400): the broker-side rebalance of a consumer that leaves it to the broker
//! (a Java push consumer with `clientRebalance=false`), and where it learns whether to PULL or
//! POP its queues.
//!
//! The queues are this broker's read queues of the topic. In clustering mode they are shared
//! out with the averaging strategy over the group's client ids (sorted, as the queues are);
//! a group set to POP whose `popShareQueueNum` is 0 or at least the number of other clients
//! gets one assignment per broker with queue id -1 (pop from every queue), as RocketMQ assigns
//! it. Broadcasting consumers get every queue. The answer is
//! `{"messageQueueAssignments":[{"messageQueue":{…},"mode":"PULL|POP"}]}`.

use comet_protocol::RemotingCommand;
use comet_protocol::code::ResponseCode;
use comet_protocol::naming::RETRY_GROUP_TOPIC_PREFIX;
use serde::{Deserialize, Serialize};

use crate::context::BrokerContext;

/// A queue as the client names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueue {
    /// The topic.
    pub topic: String,
    /// The broker holding it.
    pub broker_name: String,
    /// The queue, or -1 for all of them (POP).
    pub queue_id: i32,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueryAssignmentRequestBody {
    topic: String,
    consumer_group: String,
    #[serde(default)]
    client_id: String,
    #[serde(default)]
    strategy_name: String,
    #[serde(default)]
    message_model: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Assignment {
    message_queue: MessageQueue,
    mode: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct QueryAssignmentResponseBody {
    message_queue_assignments: Option<Vec<Assignment>>,
}

/// RocketMQ's `AllocateMessageQueueAveragely`: a contiguous share of the sorted queues for the
/// client's place among the sorted clients; nothing for an unknown client.
pub fn allocate_averagely<T: Clone>(all: &[T], clients: &[String], client: &str) -> Vec<T> {
    let Some(index) = clients.iter().position(|c| c == client) else {
        return Vec::new();
    };
    let (n, c) = (all.len(), clients.len());
    if n == 0 {
        return Vec::new();
    }
    let rem = n % c;
    let average = if n <= c {
        1
    } else if rem > 0 && index < rem {
        n / c + 1
    } else {
        n / c
    };
    let start = if rem > 0 && index < rem {
        index * average
    } else {
        index * average + rem
    };
    let range = average.min(n.saturating_sub(start));
    (0..range).map(|i| all[(start + i) % n].clone()).collect()
}

/// The queues of a POP group (RocketMQ's `allocate4Pop`).
pub fn allocate_for_pop(
    all: &[MessageQueue],
    clients: &[String],
    client: &str,
    share: i32,
) -> Vec<MessageQueue> {
    let others = i32::try_from(clients.len()).unwrap_or(i32::MAX) - 1;
    if share <= 0 || share >= others {
        let mut every: Vec<MessageQueue> = all
            .iter()
            .map(|q| MessageQueue {
                queue_id: -1,
                ..q.clone()
            })
            .collect();
        every.dedup();
        return every;
    }
    let mut result = allocate_averagely(all, clients, client);
    if clients.len() <= all.len()
        && let Some(mut index) = clients.iter().position(|c| c == client)
    {
        for _ in 0..share {
            index = (index + 1) % clients.len();
            result.extend(allocate_averagely(all, clients, &clients[index]));
        }
    }
    result.sort();
    result.dedup();
    result
}

/// QUERY_ASSIGNMENT.
pub fn query_assignment(ctx: &BrokerContext, request: &RemotingCommand) -> RemotingCommand {
    let body: Option<QueryAssignmentRequestBody> = request
        .body
        .as_ref()
        .and_then(|b| serde_json::from_slice(b).ok());
    let Some(body) = body else {
        return crate::processor::error_response(
            ResponseCode::SystemError,
            "query assignment: body does not decode",
        );
    };
    let (mode, share) = match ctx.pop.request_modes.get(&body.topic, &body.consumer_group) {
        Some(m) if !body.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) => {
            (m.mode, m.pop_share_queue_num)
        }
        _ => ("PULL".to_owned(), 0),
    };
    let assigned = ctx.topic_config.select(&body.topic).and_then(|config| {
        let mut all: Vec<MessageQueue> = (0..config.read_queue_nums)
            .map(|queue_id| MessageQueue {
                topic: body.topic.clone(),
                broker_name: ctx.config.broker_name.clone(),
                queue_id,
            })
            .collect();
        all.sort();
        if body.message_model.as_deref() == Some("BROADCASTING") {
            return Some(all);
        }
        let mut clients = ctx.consumers.group_info(&body.consumer_group)?.client_ids();
        clients.sort();
        if !body.strategy_name.is_empty() && body.strategy_name != "AVG" {
            tracing::debug!(strategy = %body.strategy_name, "unknown strategy; averaging");
        }
        Some(if mode == "POP" {
            allocate_for_pop(&all, &clients, &body.client_id, share)
        } else {
            allocate_averagely(&all, &clients, &body.client_id)
        })
    });
    let response = QueryAssignmentResponseBody {
        message_queue_assignments: assigned.map(|queues| {
            queues
                .into_iter()
                .map(|message_queue| Assignment {
                    message_queue,
                    mode: mode.clone(),
                })
                .collect()
        }),
    };
    match serde_json::to_vec(&response) {
        Ok(bytes) => RemotingCommand::response(ResponseCode::Success, None).with_body(bytes),
        Err(e) => crate::processor::error_response(ResponseCode::SystemError, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(n: i32) -> Vec<MessageQueue> {
        (0..n)
            .map(|queue_id| MessageQueue {
                topic: "T".into(),
                broker_name: "b".into(),
                queue_id,
            })
            .collect()
    }

    #[test]
    fn averaging_matches_the_java_strategy() {
        let clients: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let ids = |c: &str| -> Vec<i32> {
            allocate_averagely(&queues(8), &clients, c)
                .iter()
                .map(|q| q.queue_id)
                .collect()
        };
        assert_eq!(ids("a"), vec![0, 1, 2]);
        assert_eq!(ids("b"), vec![3, 4, 5]);
        assert_eq!(ids("c"), vec![6, 7]);
        assert!(ids("z").is_empty());
    }

    #[test]
    fn a_pop_group_shares_every_queue_when_the_share_covers_the_group() {
        let clients = vec!["a".to_string()];
        let all = allocate_for_pop(&queues(4), &clients, "a", 8);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].queue_id, -1);
        let clients: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let shared = allocate_for_pop(&queues(4), &clients, "a", 1);
        assert_eq!(
            shared.iter().map(|q| q.queue_id).collect::<Vec<_>>(),
            vec![0, 1]
        );
    }
}
