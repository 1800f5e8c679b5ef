//! The `broker.conf` file format: Java's `.properties` (`key=value`, `key: value` or
//! `key value`; `#`/`!` comments; a trailing backslash continues a line).

use std::fmt::Write as _;
use std::path::Path;

use comet_config_file::properties::{logical_lines, split_key_value};

use super::{BrokerConfig, ConfigError};

/// The `(key, value)` pairs of Java properties text, in text order (continuations joined,
/// comments skipped), without interpreting the keys.
pub fn parse_pairs(text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    Ok(comet_config_file::properties::parse_pairs(text)?)
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
