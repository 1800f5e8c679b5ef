//! Interop runner: Comet's client SDK against Apache RocketMQ's own name server and broker.
//!
//! Comet promises that a RocketMQ user changes nothing but the address; for the client half of
//! that promise the reference peer is the Apache broker, because its answers (header fields,
//! offsets, retry/DLQ routing, index queries) are what every real deployment gives. Each run
//! executes one scenario so `run.sh` can run several at once and attribute a hang or a crash to
//! one row:
//!
//! ```text
//! comet-client-interop --namesrv 127.0.0.1:9876 --scenario send_sync --suffix 42
//! comet-client-interop --list
//! ```
//!
//! Every topic and group name ends in the suffix, so scenarios never share broker state and a
//! rerun against a long-lived broker starts fresh. The last line printed is
//! `RESULT <scenario> pass` or `RESULT <scenario> FAIL <first failing assertion>`; the exit
//! status is 0 for pass, 1 for a failure, 2 for a usage error.

mod builder_row;
mod scenarios;
mod support;
mod trace_row;

use std::process::ExitCode;

use comet_protocol::SerializeType;
use support::Ctx;

/// Exit status of a failed scenario.
const EXIT_FAIL: u8 = 1;
/// Exit status of a command line that names no runnable scenario.
const EXIT_USAGE: u8 = 2;

const USAGE: &str = "usage: comet-client-interop --namesrv ADDR --scenario NAME [--suffix S] \
                     [--serialize json|rocketmq] | --list";

/// What the command line asked for.
enum Command {
    List,
    Run {
        namesrv: String,
        scenario: String,
        suffix: String,
        serialize: SerializeType,
    },
}

fn parse_args(args: impl Iterator<Item = String>) -> Result<Command, String> {
    let mut namesrv = None;
    let mut scenario = None;
    let mut suffix = None;
    let mut serialize = SerializeType::Json;
    let mut args = args.skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--list" => return Ok(Command::List),
            "--namesrv" => namesrv = Some(value("--namesrv")?),
            "--scenario" => scenario = Some(value("--scenario")?),
            "--suffix" => suffix = Some(value("--suffix")?),
            "--serialize" => {
                serialize = match value("--serialize")?.to_ascii_lowercase().as_str() {
                    "json" => SerializeType::Json,
                    "rocketmq" => SerializeType::RocketMq,
                    other => return Err(format!("unknown header serialization {other}")),
                }
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let suffix = suffix.unwrap_or_else(|| std::process::id().to_string());
    if !suffix
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err("--suffix may hold only ASCII letters, digits and '_'".to_owned());
    }
    Ok(Command::Run {
        namesrv: namesrv.ok_or("--namesrv is required")?,
        scenario: scenario.ok_or("--scenario is required")?,
        suffix,
        serialize,
    })
}

fn main() -> ExitCode {
    let command = match parse_args(std::env::args()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let (namesrv, name, suffix, serialize) = match command {
        Command::List => {
            for s in scenarios::ALL {
                println!("{}\t{}", s.name, s.title);
            }
            return ExitCode::SUCCESS;
        }
        Command::Run {
            namesrv,
            scenario,
            suffix,
            serialize,
        } => (namesrv, scenario, suffix, serialize),
    };
    let Some(scenario) = scenarios::ALL.iter().find(|s| s.name == name) else {
        eprintln!("unknown scenario {name} (see --list)\n{USAGE}");
        return ExitCode::from(EXIT_USAGE);
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            println!("RESULT {name} FAIL could not build the runtime: {e}");
            return ExitCode::from(EXIT_FAIL);
        }
    };
    // Client logs go to stderr, filtered by RUST_LOG (nothing by default).
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let ctx = Ctx::new(namesrv, suffix, serialize);
    let outcome = runtime.block_on(async {
        match tokio::time::timeout(scenario.budget, (scenario.run)(ctx)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!(
                "scenario did not finish within {:?}",
                scenario.budget
            )),
        }
    });
    // Consumers may leave background tasks behind when an assertion failed mid-way.
    runtime.shutdown_timeout(support::SHUTDOWN_GRACE);
    match outcome {
        Ok(()) => {
            println!("RESULT {name} pass");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            let one_line = failure.replace('\n', " ");
            println!("RESULT {name} FAIL {one_line}");
            ExitCode::from(EXIT_FAIL)
        }
    }
}
