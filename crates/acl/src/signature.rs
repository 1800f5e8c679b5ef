//! The request signature of RocketMQ ACL 1.0.
//!
//! The signed content is the *values* of every ext field except `Signature`, taken in the order
//! of their keys, concatenated as UTF-8, followed by the raw body. Keys are ordered the way Java's
//! `TreeMap<String, _>` orders them — by UTF-16 code units, which differs from Rust's byte order
//! for characters above U+FFFF — because a single misplaced value makes every signature differ
//! from the Java client's and broker's. The signature is Base64 (standard, padded) of
//! HmacSHA1(secretKey, content).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use comet_protocol::RemotingCommand;
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;

/// Ext field carrying the access key.
pub const ACCESS_KEY: &str = "AccessKey";
/// Ext field carrying the signature; never part of the signed content.
pub const SIGNATURE: &str = "Signature";
/// Ext field carrying an optional security token.
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// Ext field that RocketMQ 4.9 brokers leave out of the signed content (see the validator).
pub const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";

/// The pieces of the signed content, in order: sorted ext field values (minus `Signature` and
/// any key in `skip`), then the body.
fn content_parts<'a>(request: &'a RemotingCommand, skip: &[&str]) -> Vec<&'a [u8]> {
    let mut fields: Vec<(&str, &str)> = request
        .ext_fields
        .iter()
        .flat_map(|ext| ext.iter())
        .filter(|(k, _)| *k != SIGNATURE && !skip.contains(k))
        .collect();
    fields.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    let mut parts: Vec<&[u8]> = fields.into_iter().map(|(_, v)| v.as_bytes()).collect();
    if let Some(body) = request.body.as_deref() {
        parts.push(body);
    }
    parts
}

/// The bytes that are signed, as one buffer (see [`request_signature`], which avoids the copy).
pub fn signed_content(request: &RemotingCommand, skip: &[&str]) -> Vec<u8> {
    content_parts(request, skip).concat()
}

/// The signature of `request` (ext fields in `skip` left out), computed without copying the
/// body: a 4 MiB message is hashed in place.
pub fn request_signature(request: &RemotingCommand, skip: &[&str], secret_key: &str) -> String {
    STANDARD.encode(hmac_sha1(&content_parts(request, skip), secret_key))
}

/// Does the `signature` sent with `request` match (constant-time comparison)?
pub fn verify_request(
    request: &RemotingCommand,
    skip: &[&str],
    secret_key: &str,
    signature: &str,
) -> bool {
    constant_time_eq(
        request_signature(request, skip, secret_key).as_bytes(),
        signature.as_bytes(),
    )
}

/// Base64(HmacSHA1(secret_key, content)).
pub fn sign(content: &[u8], secret_key: &str) -> String {
    STANDARD.encode(hmac_sha1(&[content], secret_key))
}

fn hmac_sha1(parts: &[&[u8]], secret_key: &str) -> Vec<u8> {
    // HMAC takes keys of any length (long ones are hashed first), so this cannot fail.
    match Hmac::<Sha1>::new_from_slice(secret_key.as_bytes()) {
        Ok(mut mac) => {
            for part in parts {
                mac.update(part);
            }
            mac.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Does `signature` (as sent) equal the signature of `content` under `secret_key`? Compared in
/// constant time so response timing does not leak how much of a forged signature was right.
pub fn verify(content: &[u8], secret_key: &str, signature: &str) -> bool {
    constant_time_eq(sign(content, secret_key).as_bytes(), signature.as_bytes())
}

/// The parts of a gRPC `authorization` header that matter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcAuthorization {
    /// The account (the Credential up to its first `/`).
    pub access_key: String,
    /// The hex signature.
    pub signature: String,
}

/// Parses `MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time, Signature=<hex>` as
/// Apache's proxy does: the algorithm up to the first space, then comma-separated `key=value`
/// pairs. `None` without a Credential or a Signature.
pub fn parse_grpc_authorization(header: &str) -> Option<GrpcAuthorization> {
    let (_, pairs) = header.trim().split_once(' ')?;
    let mut access_key = None;
    let mut signature = None;
    for pair in pairs.split(',') {
        let Some((key, value)) = pair.trim().split_once('=') else {
            continue;
        };
        match key.trim() {
            "Credential" => {
                access_key = value.split('/').next().map(|v| v.trim().to_owned());
            }
            "Signature" => signature = Some(value.trim().to_owned()),
            _ => {}
        }
    }
    Some(GrpcAuthorization {
        access_key: access_key.filter(|a| !a.is_empty())?,
        signature: signature?,
    })
}

/// The signature a 5.x gRPC client sends for `date_time` (its `x-mq-date-time` header): the
/// HMAC-SHA1 under `secret_key`, upper-case hex as the Java SDK writes it.
pub fn grpc_signature(date_time: &str, secret_key: &str) -> String {
    hmac_sha1(&[date_time.as_bytes()], secret_key)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect()
}

/// Whether `signature_hex` (either case) is the HMAC-SHA1 of `content` under `secret_key`,
/// compared in constant time.
pub fn verify_hex(content: &[u8], secret_key: &str, signature_hex: &str) -> bool {
    let Some(sent) = decode_hex(signature_hex) else {
        return false;
    };
    constant_time_eq(&hmac_sha1(&[content], secret_key), &sent)
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks(2)
        .map(|pair| {
            let digit = |b: u8| char::from(b).to_digit(16);
            let (high, low) = (digit(*pair.first()?)?, digit(*pair.get(1)?)?);
            u8::try_from(high * 16 + low).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_protocol::command::ExtFields;

    /// Independent vector, computed with python3's standard library:
    ///
    /// ```text
    /// >>> import hmac, hashlib, base64
    /// >>> content = b"rocketmqAKgroupA" + b"1" + b"TopicTest" + b"hello"
    /// >>> base64.b64encode(hmac.new(b"12345678", content, hashlib.sha1).digest())
    /// b'jy+edSmp+RJRp/42g1c3jP/CKks='
    /// ```
    ///
    /// (keys sorted: AccessKey, group, queueId, topic; values concatenated, then the body).
    const PYTHON_SIGNATURE: &str = "jy+edSmp+RJRp/42g1c3jP/CKks=";

    fn request() -> RemotingCommand {
        let mut ext = ExtFields::new();
        ext.insert("topic", "TopicTest");
        ext.insert("queueId", "1");
        ext.insert("group", "groupA");
        ext.insert(ACCESS_KEY, "rocketmqAK");
        RemotingCommand::request(10)
            .with_ext_fields(ext)
            .with_body(&b"hello"[..])
    }

    #[test]
    fn content_is_sorted_values_then_body() {
        assert_eq!(
            signed_content(&request(), &[]),
            b"rocketmqAKgroupA1TopicTesthello".to_vec()
        );
    }

    #[test]
    fn signature_matches_an_independent_implementation() {
        let content = signed_content(&request(), &[]);
        assert_eq!(sign(&content, "12345678"), PYTHON_SIGNATURE);
        assert_eq!(
            request_signature(&request(), &[], "12345678"),
            PYTHON_SIGNATURE
        );
        assert!(verify_request(
            &request(),
            &[],
            "12345678",
            PYTHON_SIGNATURE
        ));
        assert!(!verify_request(
            &request(),
            &[],
            "1234567",
            PYTHON_SIGNATURE
        ));
        assert!(verify(&content, "12345678", PYTHON_SIGNATURE));
        assert!(!verify(&content, "12345679", PYTHON_SIGNATURE));
        assert!(!verify(
            &content,
            "12345678",
            "jy+edSmp+RJRp/42g1c3jP/CKkt="
        ));
        assert!(!verify(&content, "12345678", ""));
    }

    #[test]
    fn signature_field_is_never_signed() {
        let mut signed = request();
        signed.ext_mut().insert(SIGNATURE, "whatever");
        assert_eq!(
            signed_content(&signed, &[]),
            signed_content(&request(), &[])
        );
    }

    #[test]
    fn keys_sort_by_utf16_code_units_like_java() {
        // U+FF5E (one UTF-16 unit 0xFF5E) sorts after U+1F600 (surrogates 0xD83D..) in Java,
        // although its UTF-8 bytes sort before.
        let mut ext = ExtFields::new();
        ext.insert("\u{FF5E}", "b");
        ext.insert("\u{1F600}", "a");
        let cmd = RemotingCommand::request(10).with_ext_fields(ext);
        assert_eq!(signed_content(&cmd, &[]), b"ab".to_vec());
    }

    #[test]
    fn grpc_authorization_headers_are_parsed_and_verified() {
        let header = "MQv2-HMAC-SHA1 Credential=RocketMQ/20231201/x, SignedHeaders=x-mq-date-time, Signature=ABCD";
        assert_eq!(
            parse_grpc_authorization(header),
            Some(GrpcAuthorization {
                access_key: "RocketMQ".to_owned(),
                signature: "ABCD".to_owned()
            })
        );
        assert_eq!(
            parse_grpc_authorization("MQv2-HMAC-SHA1 Signature=AB"),
            None
        );
        assert_eq!(parse_grpc_authorization("garbage"), None);
        let hex = grpc_signature("20231201T120000Z", "secret");
        assert!(verify_hex(b"20231201T120000Z", "secret", &hex));
        assert!(verify_hex(
            b"20231201T120000Z",
            "secret",
            &hex.to_lowercase()
        ));
        assert!(!verify_hex(b"20231201T120001Z", "secret", &hex));
        assert!(!verify_hex(b"20231201T120000Z", "secret", "zz"));
    }
}
