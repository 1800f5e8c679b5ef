//! A strategy that refuses to allocate (an unknown machine room, say) leaves the consumer's
//! queues as they are, as the Java client's rebalance does when a strategy throws, instead of
//! dropping every queue of the topic.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use comet_client::consumer::MessageQueue;
use comet_client::consumer::rebalance::{
    AllocateError, AllocateMessageQueueAveragely, AllocateMessageQueueStrategy,
};
use comet_testkit::client::*;

/// Averagely, until told to refuse; counts its calls.
#[derive(Default)]
struct Refusing {
    refuse: AtomicBool,
    calls: AtomicUsize,
}

impl AllocateMessageQueueStrategy for Refusing {
    fn allocate(
        &self,
        consumer_group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        self.try_allocate(consumer_group, current_cid, mq_all, cid_all)
            .unwrap_or_default()
    }

    fn try_allocate(
        &self,
        consumer_group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Result<Vec<MessageQueue>, AllocateError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.refuse.load(Ordering::SeqCst) {
            return Err(AllocateError::UnknownMachineRoom("every queue".to_owned()));
        }
        Ok(AllocateMessageQueueAveragely.allocate(consumer_group, current_cid, mq_all, cid_all))
    }

    fn name(&self) -> &'static str {
        "REFUSING"
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_allocation_keeps_the_owned_queues() {
    let cluster = Cluster::start().await;
    let topic = "AllocRefusal";
    cluster.create_topic(topic, 2).await;
    let strategy = Arc::new(Refusing::default());
    let mut config = consumer_config(&cluster, "alloc_refusal", &unique_instance("refusal"));
    config.allocate_message_queue_strategy =
        Arc::clone(&strategy) as Arc<dyn AllocateMessageQueueStrategy>;
    let (listener, _rx) = reporting_listener("r");
    let consumer = start_consumer(config, topic, listener).await;
    let owned = || {
        consumer
            .owned_queues()
            .into_iter()
            .filter(|mq| mq.topic == topic)
            .count()
    };
    assert!(
        wait_until(|| {
            let n = owned();
            async move { n == 2 }
        })
        .await
    );

    strategy.refuse.store(true, Ordering::SeqCst);
    let before = strategy.calls.load(Ordering::SeqCst);
    consumer.do_rebalance().await;
    consumer.do_rebalance().await;
    assert!(strategy.calls.load(Ordering::SeqCst) >= before + 2);
    assert_eq!(owned(), 2, "the refused rebalances kept both queues");

    strategy.refuse.store(false, Ordering::SeqCst);
    consumer.do_rebalance().await;
    assert_eq!(owned(), 2);
    consumer.shutdown().await;
    cluster.shutdown().await;
}
