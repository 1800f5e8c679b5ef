//! Permission bytes of RocketMQ ACL 1.0 and the rule that compares them.
//!
//! The values are RocketMQ's own (`DENY=1, ANY=2, PUB=4, SUB=8`), because they are what an
//! operator reasons about when reading `plain_acl.yml`, and the check rule is reproduced exactly:
//! an owned DENY always wins, ANY needs PUB or SUB, anything else needs a common bit.

/// Explicitly refused.
pub const DENY: u8 = 1;
/// Either PUB or SUB is enough.
pub const ANY: u8 = 2;
/// May send to the topic.
pub const PUB: u8 = 4;
/// May consume from the topic, or act as the consumer group.
pub const SUB: u8 = 8;

/// `plain_acl.yml` perm text → perm byte. Unknown or missing text is DENY, as in RocketMQ:
/// a typo must refuse access, never grant it.
pub fn parse_perm(text: Option<&str>) -> u8 {
    match text.map(str::trim) {
        Some("PUB") => PUB,
        Some("SUB") => SUB,
        Some("PUB|SUB") | Some("SUB|PUB") => PUB | SUB,
        _ => DENY,
    }
}

/// Does `owned` grant `needed`?
pub fn check_permission(needed: u8, owned: u8) -> bool {
    if owned & DENY != 0 {
        return false;
    }
    if needed & ANY != 0 {
        return owned & (PUB | SUB) != 0;
    }
    needed & owned != 0
}

/// The name of a needed permission, for remarks.
pub fn perm_name(perm: u8) -> &'static str {
    match perm {
        PUB => "PUB",
        SUB => "SUB",
        p if p == PUB | SUB => "PUB|SUB",
        ANY => "ANY",
        _ => "DENY",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_spelling() {
        assert_eq!(parse_perm(Some("PUB")), PUB);
        assert_eq!(parse_perm(Some(" SUB ")), SUB);
        assert_eq!(parse_perm(Some("PUB|SUB")), PUB | SUB);
        assert_eq!(parse_perm(Some("SUB|PUB")), PUB | SUB);
        assert_eq!(parse_perm(Some("DENY")), DENY);
        assert_eq!(parse_perm(Some("pub")), DENY);
        assert_eq!(parse_perm(Some("")), DENY);
        assert_eq!(parse_perm(None), DENY);
    }

    #[test]
    fn check_rule() {
        assert!(check_permission(PUB, PUB));
        assert!(check_permission(PUB, PUB | SUB));
        assert!(!check_permission(PUB, SUB));
        assert!(check_permission(SUB, SUB));
        assert!(!check_permission(SUB, PUB));
        assert!(!check_permission(PUB, DENY));
        assert!(!check_permission(PUB, DENY | PUB));
        assert!(check_permission(ANY, PUB));
        assert!(check_permission(ANY, SUB));
        assert!(!check_permission(ANY, DENY));
        assert!(!check_permission(ANY, 0));
    }
}
