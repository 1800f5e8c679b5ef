//! The `broker.conf` file format: Java's `.properties` (`key=value`, `key: value` or
//! `key value`; `#`/`!` comments; a trailing backslash continues a line).

use std::fmt::Write as _;
use std::path::Path;

use super::{BrokerConfig, ConfigError, MAX_CONFIG_LINE_LEN};

/// One logical line of properties text: continuations joined, with the physical lines it spans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LogicalLine {
    /// Index (0-based) of its first physical line.
    pub first: usize,
    /// Index (0-based) of its last physical line.
    pub last: usize,
    /// The joined text.
    pub text: String,
}

/// Joins continuation lines into logical lines, skipping blank and comment lines.
pub(super) fn logical_lines(text: &str) -> Result<Vec<LogicalLine>, ConfigError> {
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
        if acc.len() > MAX_CONFIG_LINE_LEN {
            return Err(ConfigError::Syntax {
                line: start + 1,
                reason: format!("line longer than {MAX_CONFIG_LINE_LEN} bytes"),
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
pub(super) fn split_key_value(line: &str) -> (&str, &str) {
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
pub fn parse_pairs(text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    logical_lines(text)?
        .into_iter()
        .map(|logical| {
            let (key, value) = split_key_value(&logical.text);
            if key.is_empty() {
                return Err(ConfigError::Syntax {
                    line: logical.first + 1,
                    reason: "missing key".to_owned(),
                });
            }
            Ok((key.to_owned(), value.to_owned()))
        })
        .collect()
}

/// A parsed `broker.conf`: the configuration and the keys it did not understand.
#[derive(Debug, Clone)]
pub struct ParsedConfig {
    pub config: BrokerConfig,
    /// Keys of the file this broker ignores, in file order. The binary logs a warning for each.
    pub unknown_keys: Vec<String>,
}

impl BrokerConfig {
    /// Parses `broker.conf` text over the defaults and validates the result.
    pub fn parse(text: &str) -> Result<ParsedConfig, ConfigError> {
        let mut config = BrokerConfig::default();
        let unknown_keys = config.apply_text(text)?;
        config.validate()?;
        Ok(ParsedConfig {
            config,
            unknown_keys,
        })
    }

    /// Applies the keys of `broker.conf` text over `self` (no validation) and returns the keys it
    /// did not understand, in file order. Lets a caller layer a file over a non-default base.
    pub fn apply_text(&mut self, text: &str) -> Result<Vec<String>, ConfigError> {
        let mut unknown_keys = Vec::new();
        for logical in logical_lines(text)? {
            let (key, value) = split_key_value(&logical.text);
            if key.is_empty() {
                return Err(ConfigError::Syntax {
                    line: logical.first + 1,
                    reason: "missing key".to_owned(),
                });
            }
            if !self.set(key, value)? {
                unknown_keys.push(key.to_owned());
            }
        }
        Ok(unknown_keys)
    }

    /// Reads and parses a `broker.conf` file.
    pub fn load(path: &Path) -> Result<ParsedConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Self::parse(&text)
    }

    /// The configuration as `broker.conf` text (`--print-config`); parsing it gives `self` back.
    pub fn to_properties(&self) -> String {
        let mut out = String::new();
        for (key, value) in self.entries() {
            let _ = writeln!(out, "{key}={value}");
        }
        out
    }
}
