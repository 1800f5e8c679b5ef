//! ACL on the gRPC endpoint: under `aclEnable` every RPC served here checks the `authorization`
//! header of the request against the accounts of `plain_acl.yml`, the same accounts remoting
//! clients sign with (see [`comet_acl::PlainAccessValidator::validate_grpc`]).
//!
//! The header is `MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time,
//! Signature=<hex>`, the signature being the HMAC-SHA1 of the `x-mq-date-time` header under the
//! account's secret key. White-listed addresses pass, as on remoting. The resources an RPC needs:
//! SendMessage and EndTransaction PUB on the topic; QueryRoute and the consumer RPCs
//! (QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration,
//! ForwardMessageToDeadLetterQueue) PUB or SUB (ANY) on the topic; the other RPCs need a valid
//! signature only. A refusal (no or unknown credentials, a wrong
//! signature, a missing permission) is answered in-band with UNAUTHORIZED, as Apache 5.3.3's
//! proxy answers both authentication and authorization failures.

use comet_acl::permission::{ANY, PUB};
use comet_acl::{GrpcCredentials, PlainAccessValidator};
use comet_grpc_proto::v2;
use comet_protocol::code::RequestCode;
use tonic::Request;

use super::status;

/// The request header carrying the signature.
pub const AUTHORIZATION_HEADER: &str = "authorization";
/// The request header the signature signs.
pub const DATE_TIME_HEADER: &str = "x-mq-date-time";

/// What one RPC needs, named by the remoting request of the same meaning (which refusals name).
#[derive(Debug, Clone)]
pub struct Needs {
    code: RequestCode,
    resources: Vec<(String, u8)>,
}

impl Needs {
    /// A valid signature only.
    pub fn signature(code: RequestCode) -> Self {
        Needs {
            code,
            resources: Vec::new(),
        }
    }

    /// PUB on `topic` (SendMessage, EndTransaction).
    pub fn publish(code: RequestCode, topic: &str) -> Self {
        Needs {
            code,
            resources: vec![(topic.to_owned(), PUB)],
        }
    }

    /// PUB or SUB on `topic` (QueryRoute, the consumer RPCs).
    pub fn any(code: RequestCode, topic: &str) -> Self {
        Needs {
            code,
            resources: vec![(topic.to_owned(), ANY)],
        }
    }
}

/// Checks `request` against `validator` (nothing to check without one); the UNAUTHORIZED status
/// to answer when refused.
pub fn check<T>(
    validator: Option<&PlainAccessValidator>,
    request: &Request<T>,
    needs: &Needs,
) -> Result<(), v2::Status> {
    let Some(validator) = validator else {
        return Ok(());
    };
    let header = |name| {
        request
            .metadata()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let credentials = GrpcCredentials {
        authorization: header(AUTHORIZATION_HEADER),
        date_time: header(DATE_TIME_HEADER),
    };
    let remote = super::peer(request).ip();
    validator
        .validate_grpc(remote, &credentials, needs.code.code(), &needs.resources)
        .map_err(|denied| status::of(v2::Code::Unauthorized, denied.to_string()))
}
