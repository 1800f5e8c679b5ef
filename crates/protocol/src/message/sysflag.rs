//! `MessageSysFlag`: the i32 bit set stored in every record and sent in send headers.
//!
//! The flag packs several independent facts (compression, transaction state, address families,
//! inner batching), so every helper here touches only its own bits and leaves the others alone:
//! the broker ORs its own bits into whatever the producer sent.

/// The body is compressed; the algorithm is in [`COMPRESSION_TYPE_MASK`].
pub const COMPRESSED: i32 = 0x1;
/// Set by the broker when the topic's filter type is MULTI_TAG.
pub const MULTI_TAGS: i32 = 0x1 << 1;
/// Not a transactional message.
pub const TRANSACTION_NOT_TYPE: i32 = 0;
/// Half message of a transaction, invisible to consumers until committed.
pub const TRANSACTION_PREPARED_TYPE: i32 = 0x1 << 2;
/// Commit record of a transaction.
pub const TRANSACTION_COMMIT_TYPE: i32 = 0x2 << 2;
/// Rollback record of a transaction.
pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0x3 << 2;
/// Mask of the two transaction-type bits.
pub const TRANSACTION_TYPE_MASK: i32 = 0x3 << 2;
/// The born host is IPv6 (20 bytes in the record instead of 8).
pub const BORNHOST_V6: i32 = 0x1 << 4;
/// The store host is IPv6 (20 bytes in the record instead of 8).
pub const STOREHOSTADDRESS_V6: i32 = 0x1 << 5;
/// 5.x inner batch: the body must be unwrapped into several messages.
pub const NEED_UNWRAP: i32 = 0x1 << 6;
/// 5.x inner batch: one record holds a whole batch.
pub const INNER_BATCH: i32 = 0x1 << 7;
/// Compression type bits (8–10).
pub const COMPRESSION_TYPE_MASK: i32 = 0x7 << 8;
/// Shift of the compression type within the flag.
pub const COMPRESSION_TYPE_SHIFT: u32 = 8;
/// Compression type value 0: legacy zlib (4.x and Go producers set only [`COMPRESSED`]).
pub const COMPRESSION_LEGACY_ZLIB_TYPE: i32 = 0;
/// Compression type LZ4 (frame format).
pub const COMPRESSION_LZ4_TYPE: i32 = 0x1 << 8;
/// Compression type zstd.
pub const COMPRESSION_ZSTD_TYPE: i32 = 0x2 << 8;
/// Compression type zlib as written by 5.x producers.
pub const COMPRESSION_ZLIB_TYPE: i32 = 0x3 << 8;

/// The transaction type bits of `sys_flag` (one of the `TRANSACTION_*` constants).
pub fn transaction_type(sys_flag: i32) -> i32 {
    sys_flag & TRANSACTION_TYPE_MASK
}

/// `sys_flag` with its transaction type replaced by `kind` (a `TRANSACTION_*` constant).
pub fn with_transaction_type(sys_flag: i32, kind: i32) -> i32 {
    (sys_flag & !TRANSACTION_TYPE_MASK) | (kind & TRANSACTION_TYPE_MASK)
}

/// Whether a stored record with `sys_flag` gets a queue offset and a ConsumeQueue unit: every
/// transaction type but PREPARED and ROLLBACK (a half message, or the record of a rollback, is
/// never consumable from its topic).
pub fn gets_queue_unit(sys_flag: i32) -> bool {
    let tran = transaction_type(sys_flag);
    tran == TRANSACTION_NOT_TYPE || tran == TRANSACTION_COMMIT_TYPE
}

/// Whether a stored record with `sys_flag` gets IndexFile entries: everything but ROLLBACK.
pub fn gets_index_entries(sys_flag: i32) -> bool {
    transaction_type(sys_flag) != TRANSACTION_ROLLBACK_TYPE
}

/// Whether the body is compressed.
pub fn is_compressed(sys_flag: i32) -> bool {
    sys_flag & COMPRESSED != 0
}

/// The raw compression type bits of `sys_flag` (one of the `COMPRESSION_*_TYPE` constants, or an
/// unknown value in bits 8–10).
pub fn compression_type_bits(sys_flag: i32) -> i32 {
    sys_flag & COMPRESSION_TYPE_MASK
}

/// `sys_flag` with the compressed bit and the compression type cleared, as a consumer leaves it
/// after decompressing the body.
pub fn clear_compression(sys_flag: i32) -> i32 {
    sys_flag & !(COMPRESSED | COMPRESSION_TYPE_MASK)
}

/// `sys_flag` with the IPv6 bits set to match the two host address families. The broker always
/// derives these bits from the sockets, never from what the producer sent.
pub fn with_host_families(sys_flag: i32, born_v6: bool, store_v6: bool) -> i32 {
    let mut flag = sys_flag & !(BORNHOST_V6 | STOREHOSTADDRESS_V6);
    if born_v6 {
        flag |= BORNHOST_V6;
    }
    if store_v6 {
        flag |= STOREHOSTADDRESS_V6;
    }
    flag
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_match_the_fact_sheet() {
        assert_eq!(MULTI_TAGS, 0x2);
        assert_eq!(TRANSACTION_PREPARED_TYPE, 0x4);
        assert_eq!(TRANSACTION_COMMIT_TYPE, 0x8);
        assert_eq!(TRANSACTION_ROLLBACK_TYPE, 0xC);
        assert_eq!(BORNHOST_V6, 0x10);
        assert_eq!(STOREHOSTADDRESS_V6, 0x20);
        assert_eq!(NEED_UNWRAP, 0x40);
        assert_eq!(INNER_BATCH, 0x80);
        assert_eq!(COMPRESSION_TYPE_MASK, 0x700);
        assert_eq!(COMPRESSED | COMPRESSION_ZLIB_TYPE, 0x301);
    }

    #[test]
    fn transaction_type_is_isolated_from_other_bits() {
        let flag = COMPRESSED | TRANSACTION_PREPARED_TYPE | BORNHOST_V6;
        assert_eq!(transaction_type(flag), TRANSACTION_PREPARED_TYPE);
        let committed = with_transaction_type(flag, TRANSACTION_COMMIT_TYPE);
        assert_eq!(transaction_type(committed), TRANSACTION_COMMIT_TYPE);
        assert_eq!(committed & !TRANSACTION_TYPE_MASK, COMPRESSED | BORNHOST_V6);
        assert_eq!(
            transaction_type(with_transaction_type(committed, TRANSACTION_NOT_TYPE)),
            TRANSACTION_NOT_TYPE
        );
    }

    #[test]
    fn only_not_and_commit_records_get_queue_units_and_only_rollback_skips_the_index() {
        let other_bits = COMPRESSED | BORNHOST_V6;
        for (kind, unit, index) in [
            (TRANSACTION_NOT_TYPE, true, true),
            (TRANSACTION_PREPARED_TYPE, false, true),
            (TRANSACTION_COMMIT_TYPE, true, true),
            (TRANSACTION_ROLLBACK_TYPE, false, false),
        ] {
            let flag = with_transaction_type(other_bits, kind);
            assert_eq!(gets_queue_unit(flag), unit, "kind {kind:#x}");
            assert_eq!(gets_index_entries(flag), index, "kind {kind:#x}");
        }
    }

    #[test]
    fn host_family_bits_replace_previous_ones() {
        let flag = with_host_families(BORNHOST_V6 | MULTI_TAGS, false, true);
        assert_eq!(flag, MULTI_TAGS | STOREHOSTADDRESS_V6);
        assert_eq!(with_host_families(0, true, false), BORNHOST_V6);
    }

    #[test]
    fn clear_compression_keeps_other_bits() {
        let flag = COMPRESSED | COMPRESSION_LZ4_TYPE | MULTI_TAGS | TRANSACTION_COMMIT_TYPE;
        assert!(is_compressed(flag));
        assert_eq!(compression_type_bits(flag), COMPRESSION_LZ4_TYPE);
        let cleared = clear_compression(flag);
        assert!(!is_compressed(cleared));
        assert_eq!(cleared, MULTI_TAGS | TRANSACTION_COMMIT_TYPE);
    }
}
