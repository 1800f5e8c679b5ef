//! Java's `.properties` text, as RocketMQ's `broker.conf`, `namesrv.conf` and `controller.conf`
//! are written: `key=value`, `key: value` or `key value`; `#`/`!` comments; a trailing backslash
//! continues a line.

use thiserror::Error;

/// Longest logical line accepted (continuations joined): a longer one is a broken file, not a
/// setting.
pub const MAX_LINE_LEN: usize = 64 * 1024;

/// Properties text that cannot be read as key/value lines.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}: {reason}")]
pub struct PropertiesError {
    /// 1-based number of the (first physical) line at fault.
    pub line: usize,
    pub reason: String,
}

/// One logical line of properties text: continuations joined, with the physical lines it spans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogicalLine {
    /// Index (0-based) of its first physical line.
    pub first: usize,
    /// Index (0-based) of its last physical line.
    pub last: usize,
    /// The joined text.
    pub text: String,
}

/// Joins continuation lines into logical lines, skipping blank and comment lines.
pub fn logical_lines(text: &str) -> Result<Vec<LogicalLine>, PropertiesError> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (idx, raw) in text.lines().enumerate() {
        let line = raw.trim_start();
        let (start, mut acc) = match pending.take() {
            Some((start, acc)) => (start, acc),
            None => {
                if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                    continue;
                }
                (idx, String::new())
            }
        };
        // A line ending in an odd number of backslashes continues on the next one.
        let trailing = line.chars().rev().take_while(|c| *c == '\\').count();
        let continues = trailing % 2 == 1;
        let content = if continues {
            line.get(..line.len() - 1).unwrap_or_default()
        } else {
            line
        };
        acc.push_str(content);
        if acc.len() > MAX_LINE_LEN {
            return Err(PropertiesError {
                line: start + 1,
                reason: format!("line longer than {MAX_LINE_LEN} bytes"),
            });
        }
        if continues {
            pending = Some((start, acc));
        } else {
            out.push(LogicalLine {
                first: start,
                last: idx,
                text: acc,
            });
        }
    }
    if let Some((start, acc)) = pending {
        let last = text.lines().count().saturating_sub(1).max(start);
        out.push(LogicalLine {
            first: start,
            last,
            text: acc,
        });
    }
    Ok(out)
}

/// Splits a logical line at the first `=`, `:` or whitespace (Java's rule), trimming both sides.
pub fn split_key_value(line: &str) -> (&str, &str) {
    let line = line.trim();
    match line.find(['=', ':', ' ', '\t']) {
        Some(pos) => {
            let key = line.get(..pos).unwrap_or_default().trim();
            let mut rest = line.get(pos..).unwrap_or_default().trim_start();
            if let Some(stripped) = rest.strip_prefix(['=', ':']) {
                rest = stripped;
            }
            (key, rest.trim())
        }
        None => (line, ""),
    }
}

/// The `(key, value)` pairs of Java properties text, in text order (continuations joined,
/// comments skipped), without interpreting the keys.
pub fn parse_pairs(text: &str) -> Result<Vec<(String, String)>, PropertiesError> {
    logical_lines(text)?
        .into_iter()
        .map(|logical| {
            let (key, value) = split_key_value(&logical.text);
            if key.is_empty() {
                return Err(PropertiesError {
                    line: logical.first + 1,
                    reason: "missing key".to_owned(),
                });
            }
            Ok((key.to_owned(), value.to_owned()))
        })
        .collect()
}
