//! Writing JSON string literals: the escaping both the lenient reader (which re-emits the
//! strings it parses as standard JSON) and the fastjson writer use.
//!
//! UTF-8 is kept as it is; quotes, backslashes and control characters are escaped, the common
//! ones by their short form (`\n`, `\t`, ...) and the other control characters as `\uXXXX`
//! ([`push_unicode_escape`], which the writer's standard mode also uses for non-ASCII text).

/// Appends `s` as a standard JSON string literal (UTF-8 kept, control characters escaped).
pub(crate) fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    let mut run = 0;
    for (i, c) in s.char_indices() {
        let esc = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            '\u{8}' => "\\b",
            '\u{c}' => "\\f",
            c if (c as u32) < 0x20 => "",
            _ => continue,
        };
        out.push_str(&s[run..i]);
        if esc.is_empty() {
            push_unicode_escape(out, c as u32);
        } else {
            out.push_str(esc);
        }
        run = i + c.len_utf8();
    }
    out.push_str(&s[run..]);
    out.push('"');
}

/// Appends `\uXXXX` for one UTF-16 code unit.
pub(crate) fn push_unicode_escape(out: &mut String, unit: u32) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[((unit >> shift) & 0xF) as usize] as char);
    }
}
