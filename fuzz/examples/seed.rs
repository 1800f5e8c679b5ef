//! Seeds `fuzz/corpus/<target>/` from the golden fixtures (frames captured from real Java and Go
//! peers), so every campaign starts from inputs that already reach deep into each decoder instead
//! of rediscovering the frame layout byte by byte.
//!
//! Usage: `cargo run --example seed -- <fixtures dir> <corpus dir>`. Files are named by a hash of
//! their content, so re-running is idempotent and never duplicates a seed.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bytes::{Bytes, BytesMut};
use comet_fuzz::{JSON_BODIES, TYPED_HEADERS, ext_fields_to_bytes};
use comet_protocol::command::ExtFields;
use comet_protocol::frame;
use comet_protocol::headers::ValueKind;
use comet_protocol::message::{batch, record};

/// Bytes before the header in a captured frame: length prefix and serialize-type/header-length.
const FRAME_PREFIX_LEN: usize = 8;
/// Request code of SEND_BATCH_MESSAGE, whose body is a batch.
const SEND_BATCH_MESSAGE: i32 = 320;
/// Most fixture-derived seeds kept per typed header (they are near-duplicates beyond that).
const MAX_FIXTURE_SEEDS_PER_HEADER: usize = 4;

#[derive(Default)]
struct Corpus {
    seeds: BTreeMap<&'static str, Vec<Vec<u8>>>,
}

impl Corpus {
    fn add(&mut self, target: &'static str, data: Vec<u8>) {
        let seeds = self.seeds.entry(target).or_default();
        if !seeds.contains(&data) {
            seeds.push(data);
        }
    }

    fn write(&self, dir: &Path) -> std::io::Result<()> {
        for (target, seeds) in &self.seeds {
            let target_dir = dir.join(target);
            fs::create_dir_all(&target_dir)?;
            for seed in seeds {
                fs::write(target_dir.join(format!("seed-{:016x}", fnv1a(seed))), seed)?;
            }
            println!("{target}: {} seeds", seeds.len());
        }
        Ok(())
    }
}

fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn fixture_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for peer in fs::read_dir(root)? {
        let peer = peer?.path();
        if !peer.is_dir() {
            continue;
        }
        for file in fs::read_dir(&peer)? {
            let file = file?.path();
            if file.extension().is_some_and(|e| e == "bin") {
                files.push(file);
            }
        }
    }
    files.sort();
    Ok(files)
}

fn seed_from_frame(corpus: &mut Corpus, raw: &[u8], header_counts: &mut [usize]) {
    corpus.add("frame", raw.to_vec());
    let mut buf = BytesMut::from(raw);
    let Ok(Some(cmd)) = frame::decode_frame(&mut buf) else {
        return;
    };
    if let Some(mark) = raw
        .get(4..FRAME_PREFIX_LEN)
        .and_then(|m| <[u8; 4]>::try_from(m).ok())
    {
        let mark = u32::from_be_bytes(mark);
        let header_len = (mark & 0x00FF_FFFF) as usize;
        if let Some(header) = raw.get(FRAME_PREFIX_LEN..FRAME_PREFIX_LEN + header_len) {
            let target = if mark >> 24 == 0 {
                "header_json"
            } else {
                "header_binary"
            };
            corpus.add(target, header.to_vec());
        }
    }
    if let Some(ext) = &cmd.ext_fields {
        let encoded = ext_fields_to_bytes(ext);
        for (i, h) in TYPED_HEADERS.iter().enumerate() {
            let has_all = h
                .fields
                .iter()
                .filter(|f| f.required)
                .all(|f| ext.contains_key(f.key));
            let touches = h.fields.iter().any(|f| ext.contains_key(f.key));
            if has_all && touches && header_counts[i] < MAX_FIXTURE_SEEDS_PER_HEADER {
                header_counts[i] += 1;
                corpus.add("typed_header", prefixed(i, &encoded));
            }
        }
        for key in ["properties", "i"] {
            if let Some(props) = ext.get(key) {
                corpus.add("properties", props.as_bytes().to_vec());
            }
        }
    }
    if let Some(body) = &cmd.body {
        seed_from_body(corpus, cmd.code, body);
    }
}

fn seed_from_body(corpus: &mut Corpus, code: i32, body: &Bytes) {
    if let Ok(records) = record::decode_records(body, false)
        && !records.is_empty()
    {
        corpus.add("record", body.to_vec());
        for msg in records {
            corpus.add("properties", msg.properties.encode().into_bytes());
        }
    }
    if code == SEND_BATCH_MESSAGE
        && let Ok(entries) = batch::decode_batch(body)
    {
        corpus.add("batch", body.to_vec());
        for entry in entries {
            corpus.add("properties", entry.properties.encode().into_bytes());
        }
    }
    if comet_protocol::body::lenient::normalize(body).is_ok() {
        for (i, b) in JSON_BODIES.iter().enumerate() {
            if (b.accepts)(body) {
                corpus.add("json_body", prefixed(i, body));
            }
        }
    }
}

/// One seed per typed header with every field set to a plausible value, so headers no fixture
/// exercises (admin, transactions, KV config) still start from a decodable input.
fn synthetic_header_seeds(corpus: &mut Corpus) {
    for (i, h) in TYPED_HEADERS.iter().enumerate() {
        let mut ext = ExtFields::new();
        for f in h.fields {
            let value = match f.kind {
                ValueKind::Text => "GoldenTopic",
                ValueKind::Int => "3",
                ValueKind::Long => "1700000000000",
                ValueKind::Bool => "true",
                ValueKind::OneOf(names) => names.first().copied().unwrap_or(""),
            };
            ext.insert(f.key, value);
        }
        if h.has_rpc {
            ext.insert("bname", "broker-a");
        }
        corpus.add("typed_header", prefixed(i, &ext_fields_to_bytes(&ext)));
    }
}

fn prefixed(selector: usize, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 1);
    out.push(u8::try_from(selector).unwrap_or(u8::MAX));
    out.extend_from_slice(data);
    out
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(fixtures), Some(out)) = (args.first(), args.get(1)) else {
        eprintln!("usage: seed <fixtures dir> <corpus dir>");
        return ExitCode::FAILURE;
    };
    let files = match fixture_files(Path::new(fixtures)) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("cannot list {fixtures}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut corpus = Corpus::default();
    let mut header_counts = vec![0_usize; TYPED_HEADERS.len()];
    for file in &files {
        match fs::read(file) {
            Ok(raw) => seed_from_frame(&mut corpus, &raw, &mut header_counts),
            Err(e) => eprintln!("skipping {}: {e}", file.display()),
        }
    }
    synthetic_header_seeds(&mut corpus);
    for seed in comet_fuzz::grpc::grpc_seeds() {
        corpus.add("grpc", seed);
    }
    println!("{} fixture frames read", files.len());
    match corpus.write(Path::new(out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cannot write corpus to {out}: {e}");
            ExitCode::FAILURE
        }
    }
}
