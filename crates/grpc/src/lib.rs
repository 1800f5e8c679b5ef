//! # comet-grpc
//!
//! The RocketMQ 5.x gRPC endpoint: `apache.rocketmq.v2.MessagingService`, the protocol the 5.x
//! SDKs (Java, Go, Rust, ...) speak to Apache's proxy, served beside a Comet broker
//! ([`start`] with the broker's handle).
//!
//! Every RPC translates protobuf messages to and from the broker's typed core
//! ([`comet_broker::core`]) and reads the broker's own state ([`BrokerContext`]): routes come
//! from the topic table, sends go through the broker's write path with the checks a remoting send
//! passes. One file per RPC:
//! [`route`] (QueryRoute), [`heartbeat`], [`telemetry`] (the settings handshake), [`send`]
//! (SendMessage), [`transaction`] (EndTransaction) and [`termination`] (NotifyClientTermination).
//! The consumer RPCs run on the broker's POP consumption: [`consumer`] (QueryAssignment and the
//! receipt handle), [`receive`] (ReceiveMessage), [`ack`] (AckMessage,
//! ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue) and [`renew`] (push consumers'
//! messages kept invisible while they are processed). The client settings received over
//! Telemetry are kept in [`clients::GrpcClients`]. PullMessage, UpdateOffset, GetOffset,
//! QueryOffset and RecallMessage answer gRPC UNIMPLEMENTED, as Apache's proxy answers the first
//! four.
//! [`tls`] serves TLS and plaintext clients on the one port. [`registry`] puts the clients in the
//! broker's producer and consumer tables, which is also how the transaction check reaches them.
//!
//! As with Apache's proxy, errors are answered in-band (a `Status` with a v2 `Code` inside a
//! gRPC OK) and every RPC needs the `x-mq-client-id` header.

#![forbid(unsafe_code)]

pub mod ack;
pub mod acl;
pub mod clients;
pub mod consumer;
pub mod heartbeat;
pub mod invisible;
pub mod message_type;
pub mod message_view;
pub mod receive;
pub mod registry;
pub mod renew;
pub mod route;
pub mod send;
pub mod status;
pub mod telemetry;
pub mod termination;
pub mod tls;
pub mod transaction;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use comet_acl::PlainAccessValidator;
use comet_grpc_proto::v2;
use comet_grpc_proto::v2::messaging_service_server::{MessagingService, MessagingServiceServer};
use comet_protocol::code::RequestCode;
use comet_protocol::message::id::UniqIdGenerator;
use futures::Stream;
use tokio::task::JoinHandle;
use tonic::{Request, Response, Status, Streaming};

use comet_broker::context::BrokerContext;
use comet_broker::transaction::TransactionService;

/// Largest gRPC message the endpoint decodes: Apache's proxy allows 130 MiB, far above a 4 MiB
/// body plus its envelope, which tonic's 4 MiB default would refuse.
pub const MAX_DECODING_MESSAGE_SIZE: usize = 130 * 1024 * 1024;
/// How long shutdown waits for open calls (Telemetry streams stay open for a client's lifetime)
/// before the remaining connections are dropped.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);
/// The request header naming the client instance.
pub const CLIENT_ID_HEADER: &str = "x-mq-client-id";

/// The `MessagingService` implementation over one broker.
pub struct GrpcMessagingService {
    ctx: Arc<BrokerContext>,
    clients: Arc<clients::GrpcClients>,
    /// The broker's transaction service, which EndTransaction hands its verdicts to.
    transaction_service: Arc<TransactionService>,
    transactions: Arc<transaction::GrpcTransactions>,
    /// The ACL under `aclEnable` (see [`acl`]).
    acl: Option<Arc<PlainAccessValidator>>,
    /// The address routes announce: `brokerIP1` and the gRPC port.
    endpoint: SocketAddr,
    uniq_ids: Arc<UniqIdGenerator>,
    /// The handles of push consumers' messages the broker renews.
    renewals: Arc<renew::Renewals>,
}

impl GrpcMessagingService {
    /// The service for `ctx`, announcing `endpoint` in routes and ending transactions through
    /// `transaction_service`.
    pub fn new(
        ctx: Arc<BrokerContext>,
        transaction_service: Arc<TransactionService>,
        acl: Option<Arc<PlainAccessValidator>>,
        endpoint: SocketAddr,
    ) -> Self {
        let uniq_ids = Arc::new(UniqIdGenerator::with_ip(ctx.store_host.ip()));
        GrpcMessagingService {
            ctx,
            clients: Arc::new(clients::GrpcClients::default()),
            transaction_service,
            transactions: Arc::new(transaction::GrpcTransactions::default()),
            acl,
            endpoint,
            uniq_ids,
            renewals: Arc::new(renew::Renewals::default()),
        }
    }

    /// The client settings received over Telemetry.
    pub fn clients(&self) -> &Arc<clients::GrpcClients> {
        &self.clients
    }

    /// The handles the broker renews for push consumers.
    pub fn renewals(&self) -> &Arc<renew::Renewals> {
        &self.renewals
    }

    /// Checks `request` against the ACL (see [`acl`]): `Err` holds the UNAUTHORIZED status to
    /// answer.
    pub fn authorize<T>(&self, request: &Request<T>, needs: &acl::Needs) -> Result<(), v2::Status> {
        acl::check(self.acl.as_deref(), request, needs)
    }
}

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    #[error("cannot serve gRPC on {0} (grpcServerPort): {1}")]
    Listen(SocketAddr, std::io::Error),
    #[error(transparent)]
    Tls(#[from] tls::GrpcTlsError),
}

/// The running endpoint. It stops on [`GrpcEndpoint::shutdown`], or when the broker shuts down.
#[derive(Debug)]
pub struct GrpcEndpoint {
    /// The address routes announce: `brokerIP1` and the bound port.
    pub addr: SocketAddr,
    stop: comet_remoting::CancellationToken,
    task: JoinHandle<()>,
}

impl GrpcEndpoint {
    /// Stops taking calls and waits, up to a short grace period, for the open ones.
    pub async fn shutdown(self) {
        self.stop.cancel();
        if let Err(e) = self.task.await {
            tracing::warn!(error = %e, "gRPC endpoint task failed");
        }
    }
}

/// Starts the endpoint of `broker` as its configuration says (`enableGrpcServer`,
/// `grpcServerPort`, the TLS keys); `None` when it serves no gRPC.
pub async fn start(broker: &comet_broker::BrokerHandle) -> Result<Option<GrpcEndpoint>, GrpcError> {
    let ctx = broker.context();
    let config = &ctx.config;
    if !config.serves_grpc() {
        return Ok(None);
    }
    let addr = config.grpc_listen_addr();
    let tls = tls::GrpcTls::from_config(config)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| GrpcError::Listen(addr, e))?;
    let stop = ctx.shutdown.child_token();
    let (addr, task) = serve(
        listener,
        tls,
        ctx,
        broker.transactions(),
        broker.acl().cloned(),
        stop.clone(),
    );
    tracing::info!(%addr, "gRPC endpoint (apache.rocketmq.v2) listening");
    Ok(Some(GrpcEndpoint { addr, stop, task }))
}

/// Serves the gRPC endpoint on `listener` (with TLS beside plaintext when `tls` is given, see
/// [`tls`]) until `stop` fires; returns the address routes announce (`brokerIP1` and the bound
/// port) and the serving task.
pub fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<tls::GrpcTls>,
    ctx: &Arc<BrokerContext>,
    transaction_service: &Arc<TransactionService>,
    acl: Option<Arc<PlainAccessValidator>>,
    stop: comet_remoting::CancellationToken,
) -> (SocketAddr, JoinHandle<()>) {
    let port = listener.local_addr().map_or(0, |a| a.port());
    let endpoint = SocketAddr::new(ctx.store_host.ip(), port);
    let service = GrpcMessagingService::new(
        Arc::clone(ctx),
        Arc::clone(transaction_service),
        acl,
        endpoint,
    );
    renew::start(
        Arc::clone(ctx),
        Arc::clone(service.renewals()),
        Arc::clone(service.clients()),
    );
    let server = MessagingServiceServer::new(service)
        .max_decoding_message_size(MAX_DECODING_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_DECODING_MESSAGE_SIZE);
    let token = stop.clone();
    let incoming = tls::incoming(listener, tls, token.clone());
    let serving = tonic::transport::Server::builder()
        .add_service(server)
        .serve_with_incoming_shutdown(incoming, async move { stop.cancelled().await });
    let task = tokio::spawn(async move {
        tokio::select! {
            result = serving => {
                if let Err(e) = result {
                    tracing::error!(error = %e, "gRPC endpoint stopped");
                }
            }
            () = async {
                token.cancelled().await;
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } => {
                tracing::debug!("gRPC endpoint: closing the connections still open");
            }
        }
    });
    (endpoint, task)
}

/// The `x-mq-client-id` of a request, or the CLIENT_ID_REQUIRED status to answer.
pub fn client_id<T>(request: &Request<T>) -> Result<String, v2::Status> {
    request
        .metadata()
        .get(CLIENT_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty())
        .map(str::to_owned)
        .ok_or_else(|| {
            status::of(
                v2::Code::ClientIdRequired,
                format!("{CLIENT_ID_HEADER} is required"),
            )
        })
}

/// The peer of a request, or the unspecified address when the transport does not know it.
pub fn peer<T>(request: &Request<T>) -> SocketAddr {
    request
        .remote_addr()
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
}

/// Time left before the call's deadline, from its `grpc-timeout` header (`<digits><unit>`, the
/// unit one of `H M S m u n`); `None` without one or when it does not parse.
pub fn remaining<T>(request: &Request<T>) -> Option<Duration> {
    let value = request.metadata().get("grpc-timeout")?.to_str().ok()?;
    let split = value.len().checked_sub(1)?;
    let (digits, unit) = (value.get(..split)?, value.get(split..)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

fn unimplemented(rpc: &str) -> Status {
    Status::unimplemented(format!("{rpc} is not served by this broker"))
}

#[tonic::async_trait]
impl MessagingService for GrpcMessagingService {
    async fn query_route(
        &self,
        request: Request<v2::QueryRouteRequest>,
    ) -> Result<Response<v2::QueryRouteResponse>, Status> {
        let topic = request
            .get_ref()
            .topic
            .as_ref()
            .map_or("", |t| t.name.as_str());
        let needs = acl::Needs::any(RequestCode::GetRouteinfoByTopic, topic);
        let response = match client_id(&request).and_then(|_| self.authorize(&request, &needs)) {
            Ok(()) => route::query_route(&self.ctx, self.endpoint, request.get_ref()),
            Err(status) => v2::QueryRouteResponse {
                status: Some(status),
                message_queues: Vec::new(),
            },
        };
        Ok(Response::new(response))
    }

    async fn heartbeat(
        &self,
        request: Request<v2::HeartbeatRequest>,
    ) -> Result<Response<v2::HeartbeatResponse>, Status> {
        let needs = acl::Needs::signature(RequestCode::HeartBeat);
        let checked =
            client_id(&request).and_then(|id| self.authorize(&request, &needs).map(|()| id));
        let status = match checked {
            Ok(id) => {
                let status = heartbeat::heartbeat(&self.clients, &id, request.get_ref());
                if let (Some(settings), Some(attached)) =
                    (self.clients.get(&id), self.clients.attached(&id))
                {
                    registry::register(&self.ctx, &attached.meta, &attached.channel, &settings);
                }
                status
            }
            Err(status) => status,
        };
        Ok(Response::new(v2::HeartbeatResponse {
            status: Some(status),
        }))
    }

    async fn send_message(
        &self,
        request: Request<v2::SendMessageRequest>,
    ) -> Result<Response<v2::SendMessageResponse>, Status> {
        let peer = peer(&request);
        let topic = request
            .get_ref()
            .messages
            .first()
            .and_then(|m| m.topic.as_ref())
            .map_or("", |t| t.name.as_str());
        let needs = acl::Needs::publish(RequestCode::SendMessage, topic);
        let response = match client_id(&request).and_then(|_| self.authorize(&request, &needs)) {
            Ok(()) => {
                send::send_message(
                    &self.ctx,
                    &self.uniq_ids,
                    &self.transactions,
                    peer,
                    request.into_inner(),
                )
                .await
            }
            Err(status) => v2::SendMessageResponse {
                status: Some(status),
                entries: Vec::new(),
            },
        };
        Ok(Response::new(response))
    }

    async fn query_assignment(
        &self,
        request: Request<v2::QueryAssignmentRequest>,
    ) -> Result<Response<v2::QueryAssignmentResponse>, Status> {
        let topic = consumer::name_of(request.get_ref().topic.as_ref());
        let needs = acl::Needs::any(RequestCode::QueryAssignment, topic);
        let response = match client_id(&request).and_then(|_| self.authorize(&request, &needs)) {
            Ok(()) => consumer::query_assignment(&self.ctx, self.endpoint, request.get_ref()),
            Err(status) => v2::QueryAssignmentResponse {
                status: Some(status),
                assignments: Vec::new(),
            },
        };
        Ok(Response::new(response))
    }

    type ReceiveMessageStream = BoxStream<v2::ReceiveMessageResponse>;

    async fn receive_message(
        &self,
        request: Request<v2::ReceiveMessageRequest>,
    ) -> Result<Response<Self::ReceiveMessageStream>, Status> {
        let topic = consumer::name_of(
            request
                .get_ref()
                .message_queue
                .as_ref()
                .and_then(|q| q.topic.as_ref()),
        );
        let needs = acl::Needs::any(RequestCode::PopMessage, topic);
        let checked =
            client_id(&request).and_then(|id| self.authorize(&request, &needs).map(|()| id));
        let answers = match checked {
            Ok(id) => {
                let call = receive::CallInfo {
                    client_id: id.clone(),
                    peer: peer(&request).to_string(),
                    remaining: remaining(&request),
                    request_timeout: self
                        .clients
                        .get(&id)
                        .and_then(|s| s.request_timeout)
                        .and_then(|d| Duration::try_from(d).ok()),
                    client_version: request
                        .metadata()
                        .get(registry::VERSION_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned),
                };
                receive::receive(&self.ctx, &self.renewals, &call, request.get_ref()).await
            }
            Err(status) => receive::refused(status),
        };
        let stream = futures::stream::iter(answers.into_iter().map(Ok::<_, Status>));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn ack_message(
        &self,
        request: Request<v2::AckMessageRequest>,
    ) -> Result<Response<v2::AckMessageResponse>, Status> {
        let topic = consumer::name_of(request.get_ref().topic.as_ref());
        let needs = acl::Needs::any(RequestCode::AckMessage, topic);
        let checked =
            client_id(&request).and_then(|id| self.authorize(&request, &needs).map(|()| id));
        let response = match checked {
            Ok(id) => ack::ack_message(&self.ctx, &self.renewals, &id, request.get_ref()).await,
            Err(status) => v2::AckMessageResponse {
                status: Some(status),
                entries: Vec::new(),
            },
        };
        Ok(Response::new(response))
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        request: Request<v2::ForwardMessageToDeadLetterQueueRequest>,
    ) -> Result<Response<v2::ForwardMessageToDeadLetterQueueResponse>, Status> {
        let topic = consumer::name_of(request.get_ref().topic.as_ref());
        let needs = acl::Needs::any(RequestCode::ConsumerSendMsgBack, topic);
        let checked =
            client_id(&request).and_then(|id| self.authorize(&request, &needs).map(|()| id));
        let status = match checked {
            Ok(id) => {
                ack::forward_to_dead_letter_queue(&self.ctx, &self.renewals, &id, request.get_ref())
                    .await
            }
            Err(status) => status,
        };
        Ok(Response::new(v2::ForwardMessageToDeadLetterQueueResponse {
            status: Some(status),
        }))
    }

    type PullMessageStream = BoxStream<v2::PullMessageResponse>;

    async fn pull_message(
        &self,
        _request: Request<v2::PullMessageRequest>,
    ) -> Result<Response<Self::PullMessageStream>, Status> {
        Err(unimplemented("PullMessage"))
    }

    async fn update_offset(
        &self,
        _request: Request<v2::UpdateOffsetRequest>,
    ) -> Result<Response<v2::UpdateOffsetResponse>, Status> {
        Err(unimplemented("UpdateOffset"))
    }

    async fn get_offset(
        &self,
        _request: Request<v2::GetOffsetRequest>,
    ) -> Result<Response<v2::GetOffsetResponse>, Status> {
        Err(unimplemented("GetOffset"))
    }

    async fn query_offset(
        &self,
        _request: Request<v2::QueryOffsetRequest>,
    ) -> Result<Response<v2::QueryOffsetResponse>, Status> {
        Err(unimplemented("QueryOffset"))
    }

    async fn end_transaction(
        &self,
        request: Request<v2::EndTransactionRequest>,
    ) -> Result<Response<v2::EndTransactionResponse>, Status> {
        let peer = peer(&request);
        let topic = request
            .get_ref()
            .topic
            .as_ref()
            .map_or("", |t| t.name.as_str());
        let needs = acl::Needs::publish(RequestCode::EndTransaction, topic);
        let status = match client_id(&request).and_then(|_| self.authorize(&request, &needs)) {
            Ok(()) => {
                transaction::end_transaction(
                    &self.ctx,
                    &self.transaction_service,
                    &self.transactions,
                    peer,
                    request.get_ref(),
                )
                .await
            }
            Err(status) => status,
        };
        Ok(Response::new(v2::EndTransactionResponse {
            status: Some(status),
        }))
    }

    type TelemetryStream = BoxStream<v2::TelemetryCommand>;

    async fn telemetry(
        &self,
        request: Request<Streaming<v2::TelemetryCommand>>,
    ) -> Result<Response<Self::TelemetryStream>, Status> {
        let id = client_id(&request).map_err(|s| Status::invalid_argument(s.message))?;
        self.authorize(&request, &acl::Needs::signature(RequestCode::HeartBeat))
            .map_err(|s| Status::unauthenticated(s.message))?;
        let meta = registry::ClientMeta::of(&request, id);
        let stream = telemetry::start(
            Arc::clone(&self.ctx),
            Arc::clone(&self.clients),
            Arc::clone(&self.transactions),
            meta,
            request.into_inner(),
        );
        Ok(Response::new(stream))
    }

    async fn notify_client_termination(
        &self,
        request: Request<v2::NotifyClientTerminationRequest>,
    ) -> Result<Response<v2::NotifyClientTerminationResponse>, Status> {
        let needs = acl::Needs::signature(RequestCode::UnregisterClient);
        let checked =
            client_id(&request).and_then(|id| self.authorize(&request, &needs).map(|()| id));
        let status = match checked {
            Ok(id) => {
                if let Some(channel) = self.clients.detach(&id, None) {
                    registry::unregister(&self.ctx, &channel);
                }
                termination::notify_client_termination(&self.clients, &id)
            }
            Err(status) => status,
        };
        Ok(Response::new(v2::NotifyClientTerminationResponse {
            status: Some(status),
        }))
    }

    async fn change_invisible_duration(
        &self,
        request: Request<v2::ChangeInvisibleDurationRequest>,
    ) -> Result<Response<v2::ChangeInvisibleDurationResponse>, Status> {
        let topic = consumer::name_of(request.get_ref().topic.as_ref());
        let needs = acl::Needs::any(RequestCode::ChangeMessageInvisibletime, topic);
        let checked =
            client_id(&request).and_then(|id| self.authorize(&request, &needs).map(|()| id));
        let response = match checked {
            Ok(id) => {
                ack::change_invisible_duration(&self.ctx, &self.renewals, &id, request.get_ref())
                    .await
            }
            Err(status) => v2::ChangeInvisibleDurationResponse {
                status: Some(status),
                receipt_handle: String::new(),
            },
        };
        Ok(Response::new(response))
    }

    async fn recall_message(
        &self,
        _request: Request<v2::RecallMessageRequest>,
    ) -> Result<Response<v2::RecallMessageResponse>, Status> {
        Err(unimplemented("RecallMessage"))
    }
}
