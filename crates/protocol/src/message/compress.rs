//! Body compression: zlib, LZ4 frame and zstd, selected by the sys flag.
//!
//! Bodies are compressed by producers and stored unchanged by the broker; consumers decompress.
//! A compressed body is attacker-controlled input that can expand a thousandfold, so every
//! decompressor here streams into a buffer capped at the caller's `max_len` and fails as soon as
//! the output would pass it, instead of trusting any size the stream claims.

use std::io::{Read, Write};

use super::sysflag;
use crate::error::ProtocolError;

/// Highest zlib level.
const ZLIB_MAX_LEVEL: i32 = 9;
/// Largest zstd window accepted when decompressing (2^24 = 16 MiB): no body inside a 16 MiB
/// frame needs a larger one.
const ZSTD_MAX_WINDOW_LOG: u32 = 24;
/// Default compression level of Java producers (`rocketmq.message.compressLevel`).
pub const DEFAULT_COMPRESS_LEVEL: i32 = 5;
/// Body size from which Java producers compress (`compressMsgBodyOverHowmuch`).
pub const DEFAULT_COMPRESS_THRESHOLD: usize = 4096;

/// A compression algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompressionType {
    /// zlib stream (deflate with zlib header and adler32 trailer), as `java.util.zip.Deflater`.
    Zlib,
    /// LZ4 frame format, as `net.jpountz.lz4.LZ4FrameOutputStream`.
    Lz4,
    /// zstd frame.
    Zstd,
}

impl CompressionType {
    /// The type named by the compression bits of `sys_flag`. Value 0 is the legacy zlib of 4.x and
    /// Go producers, which set only [`sysflag::COMPRESSED`]. Unknown values (4–7) also map to zlib,
    /// which is what a 4.x consumer (which ignores these bits) would try; use
    /// [`CompressionType::try_from_sys_flag`] to reject them instead.
    pub fn from_sys_flag(sys_flag: i32) -> CompressionType {
        Self::try_from_sys_flag(sys_flag).unwrap_or(CompressionType::Zlib)
    }

    /// The type named by the compression bits of `sys_flag`, failing on unknown values.
    pub fn try_from_sys_flag(sys_flag: i32) -> Result<CompressionType, ProtocolError> {
        match sysflag::compression_type_bits(sys_flag) {
            sysflag::COMPRESSION_LEGACY_ZLIB_TYPE | sysflag::COMPRESSION_ZLIB_TYPE => {
                Ok(CompressionType::Zlib)
            }
            sysflag::COMPRESSION_LZ4_TYPE => Ok(CompressionType::Lz4),
            sysflag::COMPRESSION_ZSTD_TYPE => Ok(CompressionType::Zstd),
            other => Err(ProtocolError::Message(format!(
                "unknown compression type {} in sys flag {sys_flag:#x}",
                other >> sysflag::COMPRESSION_TYPE_SHIFT
            ))),
        }
    }

    /// The compression type bits only (as Java's `getCompressionFlag`); a producer ORs these and
    /// [`sysflag::COMPRESSED`] into its sys flag (see [`CompressionType::mark`]).
    pub fn to_sys_flag(self) -> i32 {
        match self {
            CompressionType::Zlib => sysflag::COMPRESSION_ZLIB_TYPE,
            CompressionType::Lz4 => sysflag::COMPRESSION_LZ4_TYPE,
            CompressionType::Zstd => sysflag::COMPRESSION_ZSTD_TYPE,
        }
    }

    /// `sys_flag` marked as compressed with this type (any previous type replaced).
    pub fn mark(self, sys_flag: i32) -> i32 {
        sysflag::clear_compression(sys_flag) | sysflag::COMPRESSED | self.to_sys_flag()
    }
}

/// Decompresses `body` as `sys_flag` says, producing at most `max_len` bytes (more is an error).
/// A body without [`sysflag::COMPRESSED`] is returned as is (copied), subject to the same bound.
pub fn decompress(sys_flag: i32, body: &[u8], max_len: usize) -> Result<Vec<u8>, ProtocolError> {
    if !sysflag::is_compressed(sys_flag) {
        if body.len() > max_len {
            return Err(too_large(body.len(), max_len));
        }
        return Ok(body.to_vec());
    }
    match CompressionType::try_from_sys_flag(sys_flag)? {
        CompressionType::Zlib => {
            read_bounded(flate2::read::ZlibDecoder::new(body), max_len, "zlib")
        }
        CompressionType::Lz4 => {
            read_bounded(lz4_flex::frame::FrameDecoder::new(body), max_len, "lz4")
        }
        CompressionType::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(body)
                .map_err(|e| codec_error("zstd", &e))?;
            // The frame header chooses the window the decoder allocates; cap it so a hostile
            // frame cannot make us reserve zstd's default limit of 128 MiB.
            decoder
                .window_log_max(ZSTD_MAX_WINDOW_LOG)
                .map_err(|e| codec_error("zstd", &e))?;
            read_bounded(decoder, max_len, "zstd")
        }
    }
}

/// Compresses `body`. `level` applies to zlib (clamped to 0–9) and zstd (clamped to zstd's
/// range); LZ4 frame has no level, as in Java.
pub fn compress(kind: CompressionType, level: i32, body: &[u8]) -> Result<Vec<u8>, ProtocolError> {
    match kind {
        CompressionType::Zlib => {
            let level = u32::try_from(level.clamp(0, ZLIB_MAX_LEVEL)).unwrap_or(0);
            let mut encoder = flate2::write::ZlibEncoder::new(
                Vec::with_capacity(body.len() / 2),
                flate2::Compression::new(level),
            );
            encoder
                .write_all(body)
                .map_err(|e| codec_error("zlib", &e))?;
            encoder.finish().map_err(|e| codec_error("zlib", &e))
        }
        CompressionType::Lz4 => {
            let mut encoder =
                lz4_flex::frame::FrameEncoder::new(Vec::with_capacity(body.len() / 2));
            encoder
                .write_all(body)
                .map_err(|e| codec_error("lz4", &e))?;
            encoder.finish().map_err(|e| codec_error("lz4", &e))
        }
        CompressionType::Zstd => {
            let range = zstd::compression_level_range();
            let level = level.clamp(*range.start(), *range.end());
            zstd::stream::encode_all(body, level).map_err(|e| codec_error("zstd", &e))
        }
    }
}

/// Reads `reader` to the end into a buffer that may not grow past `max_len`.
fn read_bounded<R: Read>(
    reader: R,
    max_len: usize,
    what: &'static str,
) -> Result<Vec<u8>, ProtocolError> {
    let limit = u64::try_from(max_len).unwrap_or(u64::MAX).saturating_add(1);
    let mut out = Vec::new();
    reader
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| codec_error(what, &e))?;
    if out.len() > max_len {
        return Err(too_large(out.len(), max_len));
    }
    Ok(out)
}

fn too_large(len: usize, max: usize) -> ProtocolError {
    ProtocolError::TooLarge {
        what: "decompressed body",
        len,
        max,
    }
}

fn codec_error(what: &str, err: &dyn std::fmt::Display) -> ProtocolError {
    ProtocolError::Body(format!("{what} (de)compression failed: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [CompressionType; 3] = [
        CompressionType::Zlib,
        CompressionType::Lz4,
        CompressionType::Zstd,
    ];

    fn sample() -> Vec<u8> {
        (0..20_000_u32)
            .map(|i| (i % 251) as u8 ^ (i / 1000) as u8)
            .collect()
    }

    #[test]
    fn round_trip_every_type() {
        let body = sample();
        for kind in ALL {
            let packed = compress(kind, DEFAULT_COMPRESS_LEVEL, &body);
            let packed = packed.unwrap_or_default();
            assert!(!packed.is_empty() && packed.len() < body.len(), "{kind:?}");
            let flag = kind.mark(sysflag::MULTI_TAGS);
            assert_eq!(CompressionType::from_sys_flag(flag), kind);
            assert_eq!(
                decompress(flag, &packed, body.len()).ok(),
                Some(body.clone())
            );
        }
    }

    #[test]
    fn output_is_bounded() {
        let body = vec![0_u8; 1 << 20];
        for kind in ALL {
            let packed = compress(kind, DEFAULT_COMPRESS_LEVEL, &body).unwrap_or_default();
            let result = decompress(kind.mark(0), &packed, body.len() - 1);
            assert!(
                matches!(result, Err(ProtocolError::TooLarge { .. })),
                "{kind:?}: {result:?}"
            );
        }
        assert!(decompress(0, b"abc", 2).is_err());
        assert_eq!(decompress(0, b"abc", 3).ok(), Some(b"abc".to_vec()));
    }

    #[test]
    fn formats_are_the_standard_ones() {
        // zlib header (CMF 0x78), LZ4 frame magic 0x184D2204 (LE), zstd magic 0xFD2FB528 (LE).
        let body = b"hello hello hello hello";
        let zlib = compress(CompressionType::Zlib, 5, body).unwrap_or_default();
        assert_eq!(zlib.first(), Some(&0x78));
        let lz4 = compress(CompressionType::Lz4, 5, body).unwrap_or_default();
        assert_eq!(lz4.get(..4), Some(&[0x04, 0x22, 0x4D, 0x18][..]));
        let zstd = compress(CompressionType::Zstd, 5, body).unwrap_or_default();
        assert_eq!(zstd.get(..4), Some(&[0x28, 0xB5, 0x2F, 0xFD][..]));
    }

    #[test]
    fn legacy_and_unknown_flags() {
        let body = b"legacy 4.x body".to_vec();
        let packed = compress(CompressionType::Zlib, 5, &body).unwrap_or_default();
        // 4.x and Go set only COMPRESSED.
        assert_eq!(
            decompress(sysflag::COMPRESSED, &packed, 100).ok(),
            Some(body)
        );
        let unknown = sysflag::COMPRESSED | (5 << 8);
        assert!(CompressionType::try_from_sys_flag(unknown).is_err());
        assert_eq!(
            CompressionType::from_sys_flag(unknown),
            CompressionType::Zlib
        );
        assert!(decompress(unknown, &packed, 100).is_err());
        assert_eq!(CompressionType::Zlib.mark(0), 0x301);
        assert_eq!(CompressionType::Lz4.to_sys_flag(), 0x100);
    }

    #[test]
    fn zstd_window_is_capped() {
        // Level 22 with long-distance matching over 40 MiB of input asks for a 2^27 window.
        let body: Vec<u8> = (0..40_u32 << 20)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).ok();
        let packed = encoder.as_mut().map(|enc| {
            let _ = enc.window_log(27);
            let _ = enc.long_distance_matching(true);
            enc.write_all(&body).is_ok()
        });
        assert_eq!(packed, Some(true));
        let packed = encoder
            .and_then(|enc| enc.finish().ok())
            .unwrap_or_default();
        let result = decompress(CompressionType::Zstd.mark(0), &packed, usize::MAX);
        assert!(matches!(result, Err(ProtocolError::Body(_))), "{result:?}");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for kind in ALL {
            assert!(
                decompress(kind.mark(0), b"\x00\x01garbage", 1024).is_err(),
                "{kind:?}"
            );
        }
    }
}
