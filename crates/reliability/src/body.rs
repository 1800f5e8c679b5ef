//! Message bodies that carry their own identity. A body is a pure function of a 64-bit id, so
//! any body read back can be checked for integrity (it must equal `body_for(its id)`) and for
//! provenance (its id must be one the harness produced) without keeping the bodies in memory.

use bytes::Bytes;

const PREFIX: &str = "comet-rel-";
/// Hex digits of the id in the body.
const ID_DIGITS: usize = 16;
/// Filler lengths cycle through `0..FILLER_SPREAD` so records have many different sizes.
const FILLER_SPREAD: u64 = 257;

/// The body of message `id`: prefix, id, then filler whose length and content depend on the id.
pub fn body_for(id: u64) -> Bytes {
    let filler_len = (id.wrapping_mul(31) % FILLER_SPREAD) as usize;
    let fill = b'a' + (id % 26) as u8;
    let mut out = Vec::with_capacity(PREFIX.len() + ID_DIGITS + 1 + filler_len);
    out.extend_from_slice(PREFIX.as_bytes());
    out.extend_from_slice(format!("{id:016x}-").as_bytes());
    out.resize(out.len() + filler_len, fill);
    Bytes::from(out)
}

/// The id a body claims to be, if it is shaped like one of ours.
pub fn claimed_id(body: &[u8]) -> Option<u64> {
    let rest = body.strip_prefix(PREFIX.as_bytes())?;
    let hex = rest.get(..ID_DIGITS)?;
    u64::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
}

/// The id of an intact body: it claims an id and equals exactly the body of that id.
pub fn intact_id(body: &[u8]) -> Option<u64> {
    let id = claimed_id(body)?;
    (body_for(id).as_ref() == body).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_round_trip_and_damage_is_detected() {
        for id in [0, 1, 255, 1 << 40, u64::MAX] {
            let body = body_for(id);
            assert_eq!(intact_id(&body), Some(id));
        }
        let mut damaged = body_for(77).to_vec();
        if let Some(last) = damaged.last_mut() {
            *last ^= 0x01;
        }
        damaged.push(b'z');
        assert_eq!(claimed_id(&damaged), Some(77));
        assert_eq!(intact_id(&damaged), None);
        assert_eq!(intact_id(b"something else"), None);
        assert_eq!(intact_id(b"comet-rel-0000"), None);
    }
}
