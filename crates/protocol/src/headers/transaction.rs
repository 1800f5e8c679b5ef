//! Transaction headers: END_TRANSACTION (producer → broker, oneway) and
//! CHECK_TRANSACTION_STATE (broker → producer, oneway; the body is the half message).

use crate::headers::command_header;

/// `commitOrRollback` values (the transaction bits of MessageSysFlag).
pub mod transaction_flag {
    /// Not a transactional outcome (unknown).
    pub const NOT_TYPE: i32 = 0;
    /// Half message prepared.
    pub const PREPARED: i32 = 0x4;
    /// Commit.
    pub const COMMIT: i32 = 0x8;
    /// Rollback.
    pub const ROLLBACK: i32 = 0xC;
}

command_header! {
    /// END_TRANSACTION (37). `remark` may carry the local transaction's exception text.
    pub struct EndTransactionRequestHeader [rpc] {
        opt topic: String => "topic",
        req producer_group: String => "producerGroup",
        /// Queue offset returned by the half-message send.
        req tran_state_table_offset: i64 => "tranStateTableOffset",
        /// Physical offset of the half message.
        req commit_log_offset: i64 => "commitLogOffset",
        /// [`transaction_flag`] value.
        req commit_or_rollback: i32 => "commitOrRollback",
        opt from_transaction_check: bool => "fromTransactionCheck",
        /// UNIQ_KEY of the message.
        req msg_id: String => "msgId",
        opt transaction_id: String => "transactionId",
    }
}

command_header! {
    /// CHECK_TRANSACTION_STATE (39).
    pub struct CheckTransactionStateRequestHeader [rpc] {
        opt topic: String => "topic",
        req tran_state_table_offset: i64 => "tranStateTableOffset",
        req commit_log_offset: i64 => "commitLogOffset",
        opt msg_id: String => "msgId",
        opt transaction_id: String => "transactionId",
        opt offset_msg_id: String => "offsetMsgId",
    }
}
