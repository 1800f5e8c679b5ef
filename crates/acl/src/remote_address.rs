//! `whiteRemoteAddress` / `globalWhiteRemoteAddresses` patterns.
//!
//! A matching peer skips signature and permission checks entirely, so a pattern that is wider
//! than intended is a security hole: every pattern is parsed strictly when the file is loaded
//! (an unparsable one fails the load instead of silently matching everything or nothing), and
//! each segment is compared numerically rather than as text.
//!
//! Accepted forms: blank (matches nothing); `*`, `*.*.*.*`, `*:*:*:*:*:*:*:*` (anything); a plain
//! IPv4 or IPv6 address; per-segment wildcards and ranges such as `10.1.*`, `10.1.2.1-100`,
//! `fe80:0:0:0:*`; a set in the last segment `10.1.2.{1,2,3}`; and comma-separated lists of
//! any of these. Wildcard IPv6 patterns are written with every leading segment spelled out (no
//! `::` compression), as in RocketMQ.

use std::net::IpAddr;

use crate::error::AclError;

/// Segments of an IPv4 address.
const V4_SEGMENTS: usize = 4;
/// Segments of an IPv6 address.
const V6_SEGMENTS: usize = 8;

/// An inclusive range of values one address segment may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SegmentRange {
    lo: u16,
    hi: u16,
}

impl SegmentRange {
    fn contains(self, value: u16) -> bool {
        (self.lo..=self.hi).contains(&value)
    }
}

/// One address form: a range per segment.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SinglePattern {
    V4([SegmentRange; V4_SEGMENTS]),
    V6([SegmentRange; V6_SEGMENTS]),
}

impl SinglePattern {
    fn matches(&self, ip: IpAddr) -> bool {
        match (self, ip) {
            (SinglePattern::V4(ranges), IpAddr::V4(v4)) => ranges
                .iter()
                .zip(v4.octets())
                .all(|(r, o)| r.contains(u16::from(o))),
            (SinglePattern::V6(ranges), IpAddr::V6(v6)) => {
                ranges.iter().zip(v6.segments()).all(|(r, s)| r.contains(s))
            }
            _ => false,
        }
    }
}

/// A parsed address pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressPattern(Kind);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// Blank pattern: matches no address.
    Nothing,
    /// `*` and its spelled-out forms: matches every address.
    Any,
    /// Matches when any element matches.
    OneOf(Vec<SinglePattern>),
}

impl AddressPattern {
    /// Parses `text` (see the module docs for the forms).
    pub fn parse(text: &str) -> Result<Self, AclError> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(AddressPattern(Kind::Nothing));
        }
        if matches!(text, "*" | "*.*.*.*" | "*:*:*:*:*:*:*:*") {
            return Ok(AddressPattern(Kind::Any));
        }
        let invalid = |reason: &str| AclError::AddressPattern {
            pattern: text.to_owned(),
            reason: reason.to_owned(),
        };
        let mut singles = Vec::new();
        if let Some(open) = text.find('{') {
            let prefix = text.get(..open).unwrap_or_default();
            let rest = text.get(open + 1..).unwrap_or_default();
            let inner = rest
                .strip_suffix('}')
                .ok_or_else(|| invalid("a `{` set must close with `}` at the end"))?;
            for item in inner.split(',') {
                let item = item.trim();
                if item.is_empty() {
                    return Err(invalid("empty element in a `{}` set"));
                }
                let full = format!("{prefix}{item}");
                singles.push(parse_single(&full).map_err(|r| invalid(&r))?);
            }
        } else {
            for item in text.split(',') {
                let item = item.trim();
                if item.is_empty() {
                    return Err(invalid("empty element in a `,` list"));
                }
                singles.push(parse_single(item).map_err(|r| invalid(&r))?);
            }
        }
        Ok(AddressPattern(Kind::OneOf(singles)))
    }

    /// The pattern that matches no address (a blank `whiteRemoteAddress`).
    pub fn nothing() -> Self {
        AddressPattern(Kind::Nothing)
    }

    /// Does `ip` match? IPv4-mapped IPv6 peers are compared as IPv4.
    pub fn matches(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        match &self.0 {
            Kind::Nothing => false,
            Kind::Any => true,
            Kind::OneOf(singles) => singles.iter().any(|s| s.matches(ip)),
        }
    }
}

fn parse_single(text: &str) -> Result<SinglePattern, String> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(match ip.to_canonical() {
            IpAddr::V4(v4) => SinglePattern::V4(v4.octets().map(|o| exact(u16::from(o)))),
            IpAddr::V6(v6) => SinglePattern::V6(v6.segments().map(exact)),
        });
    }
    if text.contains('.') {
        let ranges = parse_segments::<V4_SEGMENTS>(text, '.', 10, u16::from(u8::MAX))?;
        Ok(SinglePattern::V4(ranges))
    } else if text.contains(':') {
        let ranges = parse_segments::<V6_SEGMENTS>(text, ':', 16, u16::MAX)?;
        Ok(SinglePattern::V6(ranges))
    } else {
        Err("not an IPv4 or IPv6 address pattern".to_owned())
    }
}

fn exact(value: u16) -> SegmentRange {
    SegmentRange {
        lo: value,
        hi: value,
    }
}

/// Parses `N` segments separated by `sep`; fewer are allowed only after a trailing `*`, which
/// then stands for every remaining segment (`10.1.*` = `10.1.*.*`).
fn parse_segments<const N: usize>(
    text: &str,
    sep: char,
    radix: u32,
    max: u16,
) -> Result<[SegmentRange; N], String> {
    let parts: Vec<&str> = text.split(sep).map(str::trim).collect();
    if parts.len() > N {
        return Err(format!("more than {N} segments"));
    }
    let mut ranges = [SegmentRange { lo: 0, hi: max }; N];
    let mut ended_with_wildcard = false;
    for (slot, part) in ranges.iter_mut().zip(&parts) {
        if ended_with_wildcard && *part != "*" {
            return Err("a segment after `*` must be `*` too".to_owned());
        }
        *slot = if *part == "*" {
            ended_with_wildcard = true;
            SegmentRange { lo: 0, hi: max }
        } else if let Some((lo, hi)) = part.split_once('-') {
            let lo = parse_number(lo.trim(), radix, max)?;
            let hi = parse_number(hi.trim(), radix, max)?;
            if lo > hi {
                return Err(format!("range {part} is empty"));
            }
            SegmentRange { lo, hi }
        } else {
            exact(parse_number(part, radix, max)?)
        };
    }
    if parts.len() < N && !ended_with_wildcard {
        return Err(format!(
            "only {} of {N} segments and no trailing `*`",
            parts.len()
        ));
    }
    Ok(ranges)
}

fn parse_number(text: &str, radix: u32, max: u16) -> Result<u16, String> {
    let value = u32::from_str_radix(text, radix)
        .map_err(|_| format!("segment {text:?} is not a number"))?;
    u16::try_from(value)
        .ok()
        .filter(|v| *v <= max)
        .ok_or_else(|| format!("segment {text:?} is larger than {max}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]))
    }

    fn pattern(s: &str) -> AddressPattern {
        AddressPattern::parse(s).unwrap_or(AddressPattern(Kind::Nothing))
    }

    #[test]
    fn blank_matches_nothing_and_star_matches_everything() {
        assert!(!pattern("").matches(ip("10.0.0.1")));
        assert!(!pattern("   ").matches(ip("::1")));
        for any in ["*", "*.*.*.*", "*:*:*:*:*:*:*:*"] {
            assert!(pattern(any).matches(ip("10.0.0.1")));
            assert!(pattern(any).matches(ip("fe80::1")));
        }
    }

    #[test]
    fn plain_address_is_exact() {
        let p = pattern("192.168.1.7");
        assert!(p.matches(ip("192.168.1.7")));
        assert!(!p.matches(ip("192.168.1.8")));
        assert!(p.matches(ip("::ffff:192.168.1.7")), "mapped IPv6 peer");
        let p6 = pattern("fe80::1");
        assert!(p6.matches(ip("fe80:0:0:0:0:0:0:1")));
        assert!(!p6.matches(ip("fe80::2")));
    }

    #[test]
    fn wildcards_ranges_sets_and_lists() {
        let w = pattern("10.1.*");
        assert!(w.matches(ip("10.1.200.3")));
        assert!(!w.matches(ip("10.2.0.1")));
        let r = pattern("10.1.2.1-100");
        assert!(r.matches(ip("10.1.2.1")));
        assert!(r.matches(ip("10.1.2.100")));
        assert!(!r.matches(ip("10.1.2.101")));
        assert!(!r.matches(ip("10.1.3.50")));
        let s = pattern("10.1.2.{1,2,3}");
        assert!(s.matches(ip("10.1.2.3")));
        assert!(!s.matches(ip("10.1.2.4")));
        let l = pattern("127.0.0.1, 10.0.0.*");
        assert!(l.matches(ip("127.0.0.1")));
        assert!(l.matches(ip("10.0.0.9")));
        assert!(!l.matches(ip("127.0.0.2")));
        let v6 = pattern("fe80:0:0:0:*");
        assert!(v6.matches(ip("fe80::abcd")));
        assert!(!v6.matches(ip("fe81::1")));
        assert!(!v6.matches(ip("10.0.0.1")));
        let v6r = pattern("fe80:0:0:0:0:0:0:1-ff");
        assert!(v6r.matches(ip("fe80::ff")));
        assert!(!v6r.matches(ip("fe80::100")));
    }

    #[test]
    fn malformed_patterns_are_errors() {
        for bad in [
            "10.1",
            "10.1.2.300",
            "10.1.*.5",
            "10.1.2.9-3",
            "10.1.2.{1,2",
            "10.1.2.{}",
            "a.b.c.d",
            "hostname",
            "1.2.3.4.5",
            "10.0.0.1,,10.0.0.2",
        ] {
            assert!(
                AddressPattern::parse(bad).is_err(),
                "{bad} must be rejected"
            );
        }
    }
}
