//! The in-band `Status` of v2 answers, and how remoting response codes map onto v2 codes.

use comet_grpc_proto::v2::{Code, Status};
use comet_protocol::code::ResponseCode;

/// A status with `code` and `message`.
pub fn of(code: Code, message: impl Into<String>) -> Status {
    Status {
        code: code as i32,
        message: message.into(),
    }
}

/// OK, with the code's name as message (as Apache's proxy answers).
pub fn ok() -> Status {
    of(Code::Ok, Code::Ok.as_str_name())
}

/// The v2 code for a remoting response code of the broker's processors. SYSTEM_BUSY,
/// TOPIC_NOT_EXIST and SUBSCRIPTION_GROUP_NOT_EXIST map as Apache's proxy maps them; so do the
/// codes without a closer v2 code (INTERNAL_SERVER_ERROR). Permission refusals, illegal messages,
/// persistence timeouts and a missing slave get the v2 code of the same meaning.
pub fn code_of(code: ResponseCode) -> Code {
    match code {
        ResponseCode::Success => Code::Ok,
        ResponseCode::SystemBusy => Code::TooManyRequests,
        ResponseCode::TopicNotExist => Code::TopicNotFound,
        ResponseCode::SubscriptionGroupNotExist => Code::ConsumerGroupNotFound,
        ResponseCode::NoPermission => Code::Forbidden,
        ResponseCode::MessageIllegal => Code::BadRequest,
        ResponseCode::FlushDiskTimeout => Code::MasterPersistenceTimeout,
        ResponseCode::FlushSlaveTimeout => Code::SlavePersistenceTimeout,
        ResponseCode::SlaveNotAvailable => Code::HaNotAvailable,
        _ => Code::InternalServerError,
    }
}

/// The status of an operation the broker refused: its response code mapped, with the remark.
pub fn refused(refusal: &comet_broker::core::Refusal) -> Status {
    of(code_of(refusal.code), refusal.remark.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remoting_codes_map_to_the_codes_clients_act_on() {
        assert_eq!(code_of(ResponseCode::Success), Code::Ok);
        assert_eq!(code_of(ResponseCode::TopicNotExist), Code::TopicNotFound);
        assert_eq!(code_of(ResponseCode::SystemBusy), Code::TooManyRequests);
        assert_eq!(
            code_of(ResponseCode::SystemError),
            Code::InternalServerError
        );
        assert_eq!(ok().code, 20000);
        assert_eq!(ok().message, "OK");
    }
}
