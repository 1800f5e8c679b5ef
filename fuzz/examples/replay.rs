//! Stable-toolchain fuzz harness: replays a corpus through one target and then feeds it
//! deterministic mutations (bit flips, boundary integers, truncations, splices) for a time budget.
//!
//! libFuzzer needs nightly-only compiler flags; this harness needs nothing but `cargo run`, so CI
//! always exercises every decoder even where `cargo fuzz` cannot build. It is also how a crash
//! file saved by libFuzzer is reproduced on stable. A panicking input is written to
//! `<artifacts>/<target>/crash-<hash>` and the process exits non-zero.
//!
//! Usage: `replay <target> [--seconds N] [--seed N] [--artifacts DIR] <file or dir>...`

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Largest input the mutator grows an input to (libFuzzer's default `-max_len` is similar).
const MAX_INPUT_LEN: usize = 64 * 1024;
/// Integers that sit on boundaries decoders must handle (lengths, counts, offsets).
const INTERESTING_I32: &[i32] = &[
    0,
    1,
    -1,
    4,
    8,
    127,
    128,
    255,
    256,
    0x7FFF,
    0x8000,
    0xFFFF,
    0x00FF_FFFF,
    0x0100_0000,
    i32::MAX,
    i32::MIN,
    i32::MAX - 3,
];
/// Default seed of the mutation stream, so two runs with the same corpus do the same work.
const DEFAULT_SEED: u64 = 0x5EED_C0DE_F00D_0001;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: tiny, fast and deterministic.
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let len = input.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                if let Some(b) = input.get_mut(i) {
                    *b ^= 1 << rng.below(8);
                }
            }
            1 if len > 0 => {
                let i = rng.below(len);
                if let Some(b) = input.get_mut(i) {
                    *b = rng.next() as u8;
                }
            }
            2 if len >= 4 => {
                let i = rng.below(len - 3);
                let v = INTERESTING_I32[rng.below(INTERESTING_I32.len())];
                let bytes = if rng.below(2) == 0 {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                };
                if let Some(dst) = input.get_mut(i..i + 4) {
                    dst.copy_from_slice(&bytes);
                }
            }
            3 => input.truncate(rng.below(len + 1)),
            4 if len > 0 => {
                let start = rng.below(len);
                let end = start + rng.below(len - start + 1);
                input.drain(start..end);
            }
            5 if len < MAX_INPUT_LEN => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                input.splice(at..at, bytes);
            }
            6 if len > 0 && len < MAX_INPUT_LEN => {
                let start = rng.below(len);
                let end = (start + 1 + rng.below(64)).min(len);
                let chunk: Vec<u8> = input.get(start..end).unwrap_or_default().to_vec();
                let at = rng.below(len + 1);
                input.splice(at..at, chunk);
            }
            7 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                input.truncate(cut);
                input.extend_from_slice(other.get(from..).unwrap_or_default());
            }
            _ if len > 0 => {
                // Replace one ASCII digit run boundary: turns "12" into "-12", "1e9"...
                let i = rng.below(len);
                let tokens = [b'-', b'9', b'"', b'{', b'}', b'[', b',', 0, 1, 2, b'\\'];
                if let Some(b) = input.get_mut(i) {
                    *b = tokens[rng.below(tokens.len())];
                }
            }
            _ => input.push(rng.next() as u8),
        }
    }
    input.truncate(MAX_INPUT_LEN);
}

fn load(paths: &[PathBuf]) -> std::io::Result<Vec<Vec<u8>>> {
    let mut inputs = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut files: Vec<PathBuf> = fs::read_dir(path)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect();
            files.sort();
            for f in files {
                inputs.push(fs::read(f)?);
            }
        } else if path.is_file() {
            inputs.push(fs::read(path)?);
        }
    }
    Ok(inputs)
}

fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn save_crash(artifacts: &Path, target: &str, input: &[u8]) {
    let dir = artifacts.join(target);
    let path = dir.join(format!("crash-{:016x}", fnv1a(input)));
    match fs::create_dir_all(&dir).and_then(|()| fs::write(&path, input)) {
        Ok(()) => eprintln!("crash input saved to {}", path.display()),
        Err(e) => eprintln!("cannot save crash input: {e}"),
    }
}

struct Options {
    target: String,
    seconds: u64,
    seed: u64,
    artifacts: PathBuf,
    paths: Vec<PathBuf>,
}

fn parse_args() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let target = args.next().ok_or("missing target")?;
    let mut opts = Options {
        target,
        seconds: 0,
        seed: DEFAULT_SEED,
        artifacts: PathBuf::from("artifacts"),
        paths: Vec::new(),
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--seconds" => {
                opts.seconds = value("--seconds")?.parse().map_err(|e| format!("{e}"))?;
            }
            "--seed" => opts.seed = value("--seed")?.parse().map_err(|e| format!("{e}"))?,
            "--artifacts" => opts.artifacts = PathBuf::from(value("--artifacts")?),
            _ => opts.paths.push(PathBuf::from(arg)),
        }
    }
    Ok(opts)
}

fn main() -> ExitCode {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!(
                "{e}\nusage: replay <target> [--seconds N] [--seed N] [--artifacts DIR] <file|dir>..."
            );
            eprintln!("targets: {}", comet_fuzz::TARGETS.join(" "));
            return ExitCode::FAILURE;
        }
    };
    if !comet_fuzz::TARGETS.contains(&opts.target.as_str()) {
        eprintln!(
            "unknown target {}; targets: {}",
            opts.target,
            comet_fuzz::TARGETS.join(" ")
        );
        return ExitCode::FAILURE;
    }
    let corpus = match load(&opts.paths) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot read inputs: {e}");
            return ExitCode::FAILURE;
        }
    };
    let run_one = |input: &[u8]| -> bool {
        panic::catch_unwind(AssertUnwindSafe(|| comet_fuzz::run(&opts.target, input))).is_ok()
    };
    for input in &corpus {
        if !run_one(input) {
            save_crash(&opts.artifacts, &opts.target, input);
            return ExitCode::FAILURE;
        }
    }
    let mut execs = corpus.len() as u64;
    let mut rng = Rng(opts.seed | 1);
    let deadline = Instant::now() + Duration::from_secs(opts.seconds);
    let mut input = Vec::new();
    while opts.seconds > 0 && Instant::now() < deadline {
        for _ in 0..256 {
            input.clear();
            if !corpus.is_empty() {
                input.extend_from_slice(&corpus[rng.below(corpus.len())]);
            }
            mutate(&mut rng, &mut input, &corpus);
            execs += 1;
            if !run_one(&input) {
                save_crash(&opts.artifacts, &opts.target, &input);
                eprintln!("{}: crash after {execs} executions", opts.target);
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "{}: {execs} executions ({} corpus inputs, {} s), 0 crashes",
        opts.target,
        corpus.len(),
        opts.seconds
    );
    ExitCode::SUCCESS
}
