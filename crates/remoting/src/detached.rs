//! A channel without a socket: a stand-in for a client that speaks another protocol (the 5.x
//! gRPC clients), so that the broker's client tables, connection listings and callbacks treat it
//! like any remoting client. What the broker sends to it is handed, decoded, to an [`Outbox`],
//! whose owner translates it into the client's own protocol or drops it. Responses to requests
//! sent through it never arrive, so `invoke` on it times out; oneway requests are what it is for.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use comet_protocol::RemotingCommand;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::channel::Channel;
use crate::codec::Frame;
use crate::limits::{
    DEFAULT_MAX_PENDING_INVOKES_PER_CONNECTION, DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK,
};
use crate::overload::OverloadMonitor;

/// Receives what the broker writes to a detached channel.
pub struct Outbox {
    channel: Channel,
    frames: mpsc::UnboundedReceiver<Frame>,
}

impl Channel {
    /// A channel with no connection behind it, announcing `remote` and `local` as its
    /// addresses; what is sent to it arrives at the returned [`Outbox`]. It stays active until
    /// [`Channel::close`].
    pub fn detached(remote: SocketAddr, local: SocketAddr) -> (Channel, Outbox) {
        let (tx, frames) = mpsc::unbounded_channel();
        let channel = Channel::new(
            remote,
            local,
            tx,
            DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK,
            Arc::new(OverloadMonitor::default()),
            DEFAULT_MAX_PENDING_INVOKES_PER_CONNECTION,
            CancellationToken::new(),
        )
        .into_detached();
        let outbox = Outbox {
            channel: channel.clone(),
            frames,
        };
        (channel, outbox)
    }
}

impl Outbox {
    /// The next command sent to the channel, or `None` once it is closed. Frames that do not
    /// decode are skipped (they were encoded by this process, so this does not happen).
    pub async fn recv(&mut self) -> Option<RemotingCommand> {
        loop {
            let frame = tokio::select! {
                frame = self.frames.recv() => frame?,
                () = self.channel.closed() => return None,
            };
            let len = frame.len();
            self.channel.budget().release(len);
            let mut bytes = BytesMut::with_capacity(len);
            bytes.extend_from_slice(&frame.head);
            for body in frame.bodies() {
                bytes.extend_from_slice(body);
            }
            match comet_protocol::frame::decode_frame(&mut bytes) {
                Ok(Some(command)) => return Some(command),
                Ok(None) | Err(_) => continue,
            }
        }
    }

    /// The channel this outbox belongs to.
    pub fn channel(&self) -> &Channel {
        &self.channel
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_protocol::code::RequestCode;

    #[tokio::test]
    async fn what_is_sent_arrives_decoded_until_closed() {
        let addr: SocketAddr = "10.0.0.1:1234".parse().expect("address");
        let (channel, mut outbox) = Channel::detached(addr, addr);
        assert!(channel.is_active());
        assert!(channel.is_detached());
        assert_eq!(channel.remote_addr(), addr);
        let request = RemotingCommand::request(RequestCode::CheckTransactionState)
            .with_body(b"half".to_vec());
        channel.invoke_oneway(request).await.expect("queued");
        let got = outbox.recv().await.expect("one command");
        assert_eq!(got.code, RequestCode::CheckTransactionState.code());
        assert_eq!(got.body.as_deref(), Some(&b"half"[..]));
        assert!(got.is_oneway());
        assert_eq!(
            channel.queued_bytes(),
            0,
            "received frames leave the budget"
        );
        channel.close();
        assert!(outbox.recv().await.is_none());
        assert!(
            channel
                .invoke_oneway(RemotingCommand::request(RequestCode::CheckTransactionState))
                .await
                .is_err()
        );
    }
}
