//! [`ProducerBuilder`] and [`TransactionProducerBuilder`]: producers configured and started in
//! one expression.

use std::sync::Arc;
use std::time::Duration;

use super::transaction_listener::{Async, Blocking, Runner};
use super::{
    AsyncTransactionListener, DefaultMQProducer, ProducerConfig, TransactionListener,
    TransactionProducer, check_group,
};
use crate::builder::client_options;
use crate::config::ClientConfig;
use crate::error::{ClientError, Result};

/// Builds a [`DefaultMQProducer`] from the settings of [`ProducerConfig`]. [`Self::build`]
/// checks the group name as a start would; [`Self::start`] also starts the producer.
///
/// # Example
///
/// ```no_run
/// # async fn demo() -> Result<(), comet_client::ClientError> {
/// use comet_client::prelude::*;
///
/// let producer = DefaultMQProducer::builder("my_producer_group")
///     .namesrv("127.0.0.1:9876")
///     .send_msg_timeout(std::time::Duration::from_secs(5))
///     .start()
///     .await?;
/// producer.send(Message::new("MyTopic", "hello")).await?;
/// producer.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until built or started"]
pub struct ProducerBuilder {
    config: ProducerConfig,
}

impl DefaultMQProducer {
    /// A builder of a producer of `producer_group`, with the Java client's defaults (the name
    /// servers default to the `NAMESRV_ADDR` environment variable).
    pub fn builder(producer_group: impl Into<String>) -> ProducerBuilder {
        let mut config = ProducerConfig::new(producer_group, "");
        config.client = ClientConfig::default();
        ProducerBuilder { config }
    }
}

impl ProducerBuilder {
    client_options!(config.client);

    /// Deadline of one send, retries included (Java `sendMsgTimeout`).
    pub fn send_msg_timeout(mut self, timeout: Duration) -> Self {
        self.config.send_msg_timeout = timeout;
        self
    }

    /// Extra attempts of a failed synchronous send, on another broker when there is one (Java
    /// `retryTimesWhenSendFailed`).
    pub fn retry_times_when_send_failed(mut self, times: u32) -> Self {
        self.config.retry_times_when_send_failed = times;
        self
    }

    /// Extra attempts of a failed asynchronous send (Java `retryTimesWhenSendAsyncFailed`).
    pub fn retry_times_when_send_async_failed(mut self, times: u32) -> Self {
        self.config.retry_times_when_send_async_failed = times;
        self
    }

    /// Largest body accepted, in bytes (Java `maxMessageSize`).
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.config.max_message_size = bytes;
        self
    }

    /// Bodies at least this long are compressed (Java `compressMsgBodyOverHowmuch`).
    pub fn compress_msg_body_over(mut self, bytes: usize) -> Self {
        self.config.compress_msg_body_over_howmuch = bytes;
        self
    }

    /// Avoid brokers that were slow or failed recently (Java `sendLatencyFaultEnable`).
    pub fn send_latency_fault_enable(mut self, enable: bool) -> Self {
        self.config.send_latency_fault_enable = enable;
        self
    }

    /// Any other setting of [`ProducerConfig`].
    pub fn configure(mut self, f: impl FnOnce(&mut ProducerConfig)) -> Self {
        f(&mut self.config);
        self
    }

    /// Turns this into the builder of a transaction producer running a blocking `listener`.
    pub fn transaction_listener(
        self,
        listener: Arc<dyn TransactionListener>,
    ) -> TransactionProducerBuilder {
        TransactionProducerBuilder {
            producer: self,
            listener: Some(Arc::new(Blocking(listener))),
        }
    }

    /// Turns this into the builder of a transaction producer running an async `listener`.
    pub fn async_transaction_listener(
        self,
        listener: impl AsyncTransactionListener,
    ) -> TransactionProducerBuilder {
        TransactionProducerBuilder {
            producer: self,
            listener: Some(Arc::new(Async(listener))),
        }
    }

    /// The producer, not started, its group name checked.
    pub fn build(self) -> Result<DefaultMQProducer> {
        check_group(&self.config.producer_group)?;
        Ok(DefaultMQProducer::new(self.config))
    }

    /// The producer, built and started.
    pub async fn start(self) -> Result<DefaultMQProducer> {
        let producer = self.build()?;
        producer.start().await?;
        Ok(producer)
    }
}

/// Builds a [`TransactionProducer`] (Java `TransactionMQProducer`): the producer settings of
/// [`ProducerBuilder`] plus the transaction listener, which is required.
#[must_use = "a builder does nothing until built or started"]
pub struct TransactionProducerBuilder {
    producer: ProducerBuilder,
    listener: Option<Arc<dyn Runner>>,
}

impl std::fmt::Debug for TransactionProducerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionProducerBuilder")
            .field("producer", &self.producer)
            .field("has_listener", &self.listener.is_some())
            .finish()
    }
}

impl TransactionProducer {
    /// A builder of a transaction producer of `producer_group`; give it a listener with
    /// [`TransactionProducerBuilder::listener`] or [`TransactionProducerBuilder::async_listener`].
    pub fn builder(producer_group: impl Into<String>) -> TransactionProducerBuilder {
        TransactionProducerBuilder {
            producer: DefaultMQProducer::builder(producer_group),
            listener: None,
        }
    }
}

impl TransactionProducerBuilder {
    client_options!(producer.config.client);

    /// The listener running local transactions and answering checks, with blocking methods.
    pub fn listener(mut self, listener: Arc<dyn TransactionListener>) -> Self {
        self.listener = Some(Arc::new(Blocking(listener)));
        self
    }

    /// The listener running local transactions and answering checks, with async methods.
    pub fn async_listener(mut self, listener: impl AsyncTransactionListener) -> Self {
        self.listener = Some(Arc::new(Async(listener)));
        self
    }

    /// Deadline of one send, retries included (Java `sendMsgTimeout`).
    pub fn send_msg_timeout(mut self, timeout: Duration) -> Self {
        self.producer = self.producer.send_msg_timeout(timeout);
        self
    }

    /// Any other setting of [`ProducerConfig`].
    pub fn configure(mut self, f: impl FnOnce(&mut ProducerConfig)) -> Self {
        self.producer = self.producer.configure(f);
        self
    }

    /// The transaction producer, not started: group name checked, listener required.
    pub fn build(self) -> Result<TransactionProducer> {
        check_group(&self.producer.config.producer_group)?;
        let Some(listener) = self.listener else {
            return Err(ClientError::IllegalArgument(
                "a transaction producer needs a transaction listener".into(),
            ));
        };
        Ok(TransactionProducer::with_runner(
            self.producer.config,
            listener,
        ))
    }

    /// The transaction producer, built and started.
    pub async fn start(self) -> Result<TransactionProducer> {
        let producer = self.build()?;
        producer.start().await?;
        Ok(producer)
    }
}
