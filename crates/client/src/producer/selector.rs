//! Choosing the queue of a send yourself: `MessageQueueSelector`.
//!
//! Ordered messaging in RocketMQ means "messages with the same key go to the same queue", and the
//! application decides which key: an order id, a user id. A selector gets the topic's queues, the
//! message and the application's argument and returns the queue.
//!
//! [`SelectMessageQueueByHash`] computes the hash exactly as the Java client's selector of the
//! same name does for strings and integers (`hashCode() % size`, negative values made positive),
//! so a Java and a Rust producer sending the same order key pick the same queue.

use comet_protocol::body::MessageQueue;
use comet_protocol::body::heartbeat::java_string_hash;

use crate::message::Message;
use crate::route::random_start;

/// Picks the queue of a send from the topic's writable queues.
pub trait MessageQueueSelector<A: ?Sized>: Send + Sync {
    /// `None` refuses the send.
    fn select(&self, mqs: &[MessageQueue], msg: &Message, arg: &A) -> Option<MessageQueue>;
}

impl<A, F> MessageQueueSelector<A> for F
where
    A: ?Sized,
    F: Fn(&[MessageQueue], &Message, &A) -> Option<MessageQueue> + Send + Sync,
{
    fn select(&self, mqs: &[MessageQueue], msg: &Message, arg: &A) -> Option<MessageQueue> {
        self(mqs, msg, arg)
    }
}

/// An argument with a Java-compatible `hashCode()`.
pub trait JavaHash {
    /// The value of Java's `hashCode()` for this argument.
    fn java_hash_code(&self) -> i32;
}

impl JavaHash for str {
    fn java_hash_code(&self) -> i32 {
        java_string_hash(self)
    }
}

impl JavaHash for String {
    fn java_hash_code(&self) -> i32 {
        java_string_hash(self)
    }
}

impl JavaHash for i32 {
    /// `Integer.hashCode()`.
    fn java_hash_code(&self) -> i32 {
        *self
    }
}

impl JavaHash for i64 {
    /// `Long.hashCode()`: the two halves XORed.
    fn java_hash_code(&self) -> i32 {
        (*self ^ (*self >> 32)) as i32
    }
}

impl JavaHash for u64 {
    fn java_hash_code(&self) -> i32 {
        (*self as i64).java_hash_code()
    }
}

/// Same key, same queue: `|hash(arg) % queue count|`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SelectMessageQueueByHash;

impl<A: JavaHash + ?Sized> MessageQueueSelector<A> for SelectMessageQueueByHash {
    fn select(&self, mqs: &[MessageQueue], _msg: &Message, arg: &A) -> Option<MessageQueue> {
        let len = i32::try_from(mqs.len()).ok().filter(|l| *l > 0)?;
        // Java: `hashCode() % size`, then `Math.abs` of a negative remainder.
        let index = (arg.java_hash_code() % len).unsigned_abs() as usize;
        mqs.get(index).cloned()
    }
}

/// A random queue for every send.
#[derive(Debug, Clone, Copy, Default)]
pub struct SelectMessageQueueByRandom;

impl<A: ?Sized> MessageQueueSelector<A> for SelectMessageQueueByRandom {
    fn select(&self, mqs: &[MessageQueue], _msg: &Message, _arg: &A) -> Option<MessageQueue> {
        if mqs.is_empty() {
            return None;
        }
        mqs.get(random_start() as usize % mqs.len()).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(n: i32) -> Vec<MessageQueue> {
        (0..n).map(|i| MessageQueue::new("T", "b", i)).collect()
    }

    #[test]
    fn hash_selector_matches_java() {
        let mqs = queues(4);
        let msg = Message::new("T", "x");
        // "order-1".hashCode() in Java = -1207111310; % 4 = -2 → abs → 2.
        assert_eq!(java_string_hash("order-1"), -1_207_111_310);
        let mq = SelectMessageQueueByHash.select(&mqs, &msg, "order-1");
        assert_eq!(mq.map(|m| m.queue_id), Some(2));
        let mq = SelectMessageQueueByHash.select(&mqs, &msg, &10_i32);
        assert_eq!(mq.map(|m| m.queue_id), Some(2));
        let mq = SelectMessageQueueByHash.select(&mqs, &msg, &-7_i32);
        assert_eq!(mq.map(|m| m.queue_id), Some(3));
        // Long.hashCode(1L << 32) = 1.
        assert_eq!((1_i64 << 32).java_hash_code(), 1);
        assert_eq!(SelectMessageQueueByHash.select(&[], &msg, "k"), None);
    }

    #[test]
    fn same_key_same_queue_and_closures_work() {
        let mqs = queues(8);
        let msg = Message::new("T", "x");
        let first = SelectMessageQueueByHash.select(&mqs, &msg, &"user-42".to_string());
        for _ in 0..10 {
            assert_eq!(
                SelectMessageQueueByHash.select(&mqs, &msg, &"user-42".to_string()),
                first
            );
        }
        let last = |mqs: &[MessageQueue], _: &Message, _: &()| mqs.last().cloned();
        assert_eq!(last.select(&mqs, &msg, &()).map(|m| m.queue_id), Some(7));
        let random = SelectMessageQueueByRandom.select(&mqs, &msg, &());
        assert!(random.is_some_and(|m| mqs.contains(&m)));
    }
}
