//! The broker's part of the configuration reference: every `broker.conf` key with its default,
//! unit and meaning, rendered from the declaration table as the broker section of
//! `docs/configuration.md`. The `comet` crate composes the whole page (this section, the
//! console's keys and the name server's) and its test `configuration_reference` compares the page
//! with that rendering, so the documentation cannot drift from the code.

use std::fmt::Write as _;

use super::BrokerConfig;

/// Where a key comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A `broker.conf` key of Apache RocketMQ's broker, same name and meaning.
    Apache,
    /// Set in Apache RocketMQ as the JVM system property named here; Comet reads it from
    /// `broker.conf`.
    Property(&'static str),
    /// Comet's own.
    Comet,
}

/// When a change of a key takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// `updateBrokerConfig` changes it while the broker runs: the services read it on each use
    /// (or are told of the change), and the change is written to the config file.
    Live,
    /// Read only when the broker starts (it shapes listeners, files or threads made then):
    /// `updateBrokerConfig` refuses it; change it in the config file and restart.
    Start,
}

/// What one key means.
#[derive(Debug, Clone, Copy)]
pub struct KeyDoc {
    /// The `broker.conf` key.
    pub key: &'static str,
    /// Unit of the value (`ms`, `secs`, `hours`, `bytes`, `percent`, `pages`, `count`), or `-`.
    pub unit: &'static str,
    pub origin: Origin,
    /// When a change takes effect.
    pub applied: Applied,
    /// The field's documentation, one line per source line.
    pub doc: &'static str,
    /// What a valid value looks like.
    pub expected: &'static str,
}

/// Defaults that depend on the machine, shown as what they are made of.
const MACHINE_DEFAULTS: &[(&str, &str)] = &[("storePathRootDir", "$HOME/store")];

/// The broker section of the reference page, in Markdown: an introduction and one table row
/// per key, without a heading.
pub fn markdown() -> String {
    let defaults = BrokerConfig::default().entries();
    let mut out = String::from(
        "Every key `comet broker -c broker.conf` and `comet serve` understand. Keys are Apache \
         RocketMQ's `broker.conf` names, so an existing file can be reused; a key Comet does not \
         know is logged by name and otherwise ignored. Values are layered, later wins: defaults, \
         then the `-c` file (without one, `<storePathRootDir>/config/broker.properties`, where \
         runtime changes are kept, if it exists), then `COMET_<KEY>` environment variables (the \
         key in upper snake case: `COMET_LISTEN_PORT`, `COMET_FLUSH_DISK_TYPE`), then \
         `--set key=value`. \
         `--print-config` prints the effective configuration. The defaults below are \
         `comet broker`'s; `comet serve` differs: it binds and advertises \
         `127.0.0.1:10911` (`--broker-listen`), keeps its store in `./comet-data/store` \
         (`--data-dir`), registers with its embedded name server, and turns on the metrics \
         endpoint (`metricsExporterType=PROM`) and the gRPC endpoint (`enableGrpcServer=true`) \
         unless they are set.\n\n\
         The *Apache* column says whether Apache RocketMQ's broker has the key: **yes** (same \
         name and meaning), the JVM system property Apache reads instead, or **no** (Comet's \
         own).\n\n\
         The *running* column says when a change takes effect. **live**: `mqadmin \
         updateBrokerConfig` (or `comet broker-config set`) changes it while the broker runs, \
         `getBrokerConfig` shows the new value at once, and the change is written to the \
         broker's config file (`brokerConfigPath`) so it survives a restart. **restart**: read \
         only at start; an update of it is refused with INVALID_PARAMETER naming the key (Apache \
         would accept it, write it to the file and show it, while the running broker keeps the \
         old value). See docs/operations.md for how updates are checked and written.\n\n\
         | key | default | unit | Apache | running | meaning |\n|---|---|---|---|---|---|\n",
    );
    for doc in BrokerConfig::REFERENCE {
        let default = MACHINE_DEFAULTS
            .iter()
            .find(|(key, _)| *key == doc.key)
            .map(|(_, text)| (*text).to_owned())
            .or_else(|| {
                defaults
                    .iter()
                    .find(|(key, _)| *key == doc.key)
                    .map(|(_, value)| value.clone())
            })
            .unwrap_or_default();
        let default = if default.is_empty() {
            "(empty)".to_owned()
        } else {
            format!("`{}`", default.replace('|', "\\|"))
        };
        let apache = match doc.origin {
            Origin::Apache => "yes".to_owned(),
            Origin::Property(name) => format!("property `{name}`"),
            Origin::Comet => "no".to_owned(),
        };
        let running = match doc.applied {
            Applied::Live => "live",
            Applied::Start => "restart",
        };
        let meaning: Vec<&str> = doc.doc.lines().map(str::trim).collect();
        let _ = writeln!(
            out,
            "| `{}` | {default} | {} | {apache} | {running} | {} ({}) |",
            doc.key,
            doc.unit,
            meaning.join(" ").replace('|', "\\|"),
            doc.expected
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page in the repository, relative to this crate.
    const PAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");

    /// The page holds this section as rendered now. The whole page is composed, checked and
    /// regenerated by the `comet` crate's test, which sees the console's and name server's
    /// tables too.
    #[test]
    fn configuration_reference_holds_the_broker_section() {
        let page = std::fs::read_to_string(PAGE).unwrap_or_default();
        assert!(
            page.contains(&markdown()),
            "docs/configuration.md differs from the broker's configuration table; regenerate it \
             with UPDATE_CONFIG_REFERENCE=1 cargo test -p comet --test it configuration_reference"
        );
    }

    #[test]
    fn every_key_is_documented_once_with_a_unit() {
        let mut seen = std::collections::HashSet::new();
        for doc in BrokerConfig::REFERENCE {
            assert!(seen.insert(doc.key), "{} declared twice", doc.key);
            assert!(
                !doc.doc.trim().is_empty(),
                "{} has no documentation",
                doc.key
            );
            assert!(
                [
                    "-", "ms", "secs", "hours", "bytes", "percent", "pages", "count"
                ]
                .contains(&doc.unit),
                "{}: unknown unit {}",
                doc.key,
                doc.unit
            );
        }
        assert_eq!(seen.len(), BrokerConfig::KEYS.len());
    }
}
