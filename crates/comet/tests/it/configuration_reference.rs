//! docs/configuration.md is generated: the broker's keys from the broker's configuration table
//! (`comet_broker::config::reference::markdown`), the console's from `ConsoleConfig::REFERENCE`
//! and the name server's from `NamesrvConfig::REFERENCE`. This test composes the page from the
//! three tables and fails when the page in the repository differs, so the reference cannot drift
//! from the code. `UPDATE_CONFIG_REFERENCE=1 cargo test -p comet --test it configuration_reference`
//! writes the page anew.

use std::fmt::Write as _;

use comet_console::ConsoleConfig;
use comet_namesrv::NamesrvConfig;
use comet_namesrv::config::Applied;

/// The page in the repository, relative to this crate.
const PAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");

const HEADER: &str = "# Configuration reference\n\n\
<!-- Generated from the configuration tables of the broker (crates/broker/src/config/), the \
console (crates/console/src/config.rs) and the name server (crates/namesrv/src/config.rs); \
regenerate with `UPDATE_CONFIG_REFERENCE=1 cargo test -p comet --test it configuration_reference`. \
-->\n\n\
Every setting of Comet's servers, in four parts:\n\n\
- [Broker](#broker): the `broker.conf` keys of `comet broker` and `comet serve`.\n\
- [Web console](#web-console): the `console*` keys of the console that `comet serve` and \
`comet broker` start beside the broker, and of `comet console`.\n\
- [Name server](#name-server): the settings of `comet namesrv` and of the name server inside \
`comet serve`, under the keys `getNamesrvConfig` and `updateNamesrvConfig` use.\n\
- [Controller](#controller): the `controller.conf` keys of `comet controller` (and of the \
controller a name server runs with `enableControllerInNamesrv=true`).\n\n";

const CONSOLE_INTRO: &str = "The console keys are read from the same layers as the broker's \
keys: the `-c` file, `COMET_<KEY>` environment variables (`COMET_CONSOLE_PORT`, ...), then \
`--set key=value`. The broker skips them and the console reads only them. They are read when \
the console starts; a change needs a restart. `comet console -n` (the console alone, for any \
RocketMQ cluster) reads the environment variables and `--set` too, and takes `--listen` (default \
`127.0.0.1:8080`) in place of `consoleHost` and `consolePort`. The console keeps its accounts \
file (`users.json`) in `console/` under `comet serve`'s data directory or `comet broker`'s \
`storePathRootDir`; `comet console` in `--data-dir` (default `comet-data/console`). See \
[the web console](console.md).\n\n\
| key | default | meaning |\n|---|---|---|\n";

const NAMESRV_INTRO: &str = "`comet namesrv` takes its settings as flags; each flag also \
reads an environment variable (`comet namesrv --help` names them), and a setting without a flag \
keeps its default. `comet namesrv -c namesrv.conf` reads the keys below from a file as well \
(they win over the flags), and with `enableControllerInNamesrv=true` the file's \
[controller keys](#controller) start a controller in the same process. The name server inside `comet serve` listens on `--namesrv-listen` (default \
`127.0.0.1:9876`), keeps its state in `namesrv/` under `--data-dir`, and takes \
`serverChannelMaxIdleTimeSeconds`, `writeBufferHighWaterMark` and TLS from the broker's keys; \
the stand-alone `comet namesrv` has no TLS listener.\n\n\
`mqadmin getNamesrvConfig` (or `comet namesrv-config get`) lists the keys below, under Apache \
RocketMQ's names. The *running* column says what `mqadmin updateNamesrvConfig` (or `comet \
namesrv-config set`) may do with each. **live**: it changes the setting at once, until the name \
server stops: the change is not written anywhere, and a restart starts from the defaults and flags \
again. **restart**: read only \
at start; an update is refused with INVALID_PARAMETER naming the key (Apache would accept it and \
change nothing until a restart). **never**: refused with NO_PERMISSION, as Apache refuses it. An \
update is all or nothing: one refused key changes nothing, and an unknown key is refused with \
INVALID_PARAMETER.\n\n\
| key | default | `comet namesrv` flag | running | meaning |\n|---|---|---|---|---|\n";

/// Text for one table cell.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// A default as a table cell: code, or `(none)` when unset.
fn default_cell(default: &str) -> String {
    if default.is_empty() {
        "(none)".to_owned()
    } else {
        format!("`{}`", default.replace('|', "\\|"))
    }
}

fn console_section() -> String {
    let mut out = String::from(CONSOLE_INTRO);
    for doc in ConsoleConfig::REFERENCE {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} |",
            doc.key,
            default_cell(doc.default),
            cell(doc.doc)
        );
    }
    out
}

fn namesrv_section() -> String {
    let mut out = String::from(NAMESRV_INTRO);
    for doc in NamesrvConfig::REFERENCE {
        let flag = if doc.flag.is_empty() {
            "–".to_owned()
        } else {
            format!("`{}`", doc.flag)
        };
        let running = match doc.applied {
            Applied::Live => "live",
            Applied::Start => "restart",
            Applied::Never => "never",
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {flag} | {running} | {} |",
            doc.key,
            default_cell(doc.default),
            cell(doc.doc)
        );
    }
    out
}

const CONTROLLER_INTRO: &str = "`comet controller -c controller.conf` reads Apache RocketMQ's \
controller keys, so an Apache controller's file starts it unchanged; `--set key=value` overrides \
one. Apache keys for things Comet does not have (DLedger's segment size, thread pools, jRaft's \
own keys, metrics exporters) are accepted and change nothing; other unknown keys are logged. The \
settings are read at start: `updateControllerConfig` is refused with NO_PERMISSION. See \
[controller mode](running-a-cluster.md#controller-mode-comet-controller).\n\n\
| key | default | meaning |\n|---|---|---|\n";

fn controller_section() -> String {
    let mut out = String::from(CONTROLLER_INTRO);
    for doc in comet_controller::ControllerConfig::REFERENCE {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} |",
            doc.key,
            default_cell(doc.default),
            cell(doc.doc)
        );
    }
    out
}

/// The whole page.
fn page() -> String {
    format!(
        "{HEADER}## Broker\n\n{}\n## Web console\n\n{}\n## Name server\n\n{}\n## Controller\n\n{}",
        comet_broker::config::reference::markdown(),
        console_section(),
        namesrv_section(),
        controller_section()
    )
}

#[test]
fn configuration_reference_matches_the_page() {
    let rendered = page();
    if std::env::var_os("UPDATE_CONFIG_REFERENCE").is_some() {
        std::fs::write(PAGE, &rendered).unwrap_or_else(|e| panic!("writing {PAGE}: {e}"));
    }
    let page = std::fs::read_to_string(PAGE).unwrap_or_default();
    assert!(
        page == rendered,
        "docs/configuration.md differs from the configuration tables of the broker, console and \
         name server; regenerate it with UPDATE_CONFIG_REFERENCE=1 cargo test -p comet --test \
         configuration_reference"
    );
}

#[test]
fn configuration_reference_has_a_row_for_every_key() {
    let page = page();
    let keys = comet_broker::BrokerConfig::KEYS
        .iter()
        .chain(ConsoleConfig::KEYS)
        .copied()
        .chain(NamesrvConfig::REFERENCE.iter().map(|d| d.key));
    for key in keys {
        let row = format!("| `{key}` |");
        assert!(page.contains(&row), "{key} has no row");
    }
}
