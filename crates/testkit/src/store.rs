//! Store-level fixtures (no broker): a store configuration with small files, messages as the
//! broker hands them to the store, a body fingerprint, a seeded generator, and directories on
//! tmpfs. Feature `store`.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;
use comet_store::{FlushDiskType, MessageStoreConfig};

/// Small geometry so tests cross segment and file boundaries quickly.
pub const TEST_SEGMENT_SIZE: usize = 64 * 1024;
pub const TEST_CQ_ENTRIES_PER_FILE: usize = 64;

pub fn test_config(root: &Path, mode: FlushDiskType) -> MessageStoreConfig {
    let mut cfg = MessageStoreConfig::with_root(root);
    cfg.mapped_file_size_commit_log = TEST_SEGMENT_SIZE;
    cfg.consume_queue_entries_per_file = TEST_CQ_ENTRIES_PER_FILE;
    cfg.max_hash_slot_num = 64;
    cfg.max_index_num = 512;
    cfg.flush_disk_type = mode;
    cfg.flush_interval_consume_queue = Duration::from_millis(100);
    cfg.flush_interval_commit_log = Duration::from_millis(50);
    // Retention stays out of the way unless a test drives it.
    cfg.delete_when = "99".into();
    cfg.disk_max_used_space_ratio = 95;
    cfg.disk_space_clean_forcibly_ratio = 100;
    cfg.disk_space_warning_level_ratio = 100;
    cfg.clean_resource_interval = Duration::from_secs(3600);
    cfg
}

pub fn born() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 40_000))
}

pub fn store_host() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 10_911))
}

/// A message as the broker would hand it to the store.
pub fn message(
    topic: &str,
    queue_id: i32,
    body: impl Into<Bytes>,
    tags: Option<&str>,
    key: Option<&str>,
) -> MessageExt {
    let mut m = MessageExt::new(topic, body.into());
    m.queue_id = queue_id;
    m.born_host = born();
    m.store_host = store_host();
    m.born_timestamp = 1_700_000_000_000;
    if let Some(t) = tags {
        m.properties.insert(keys::TAGS, t);
    }
    if let Some(k) = key {
        m.properties.insert(keys::KEYS, k);
    }
    m
}

/// FNV-1a, enough to fingerprint bodies in side files.
pub fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Tiny deterministic PRNG (xorshift64*), so failures are reproducible from the seed.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| (self.next_u64() & 0xFF) as u8).collect()
    }
}

/// A temporary directory, on tmpfs when the machine has one: the recovery tests open and close
/// hundreds of stores, and every close fsyncs.
pub fn fast_tempdir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::tempdir_in(shm)
    {
        return dir;
    }
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

/// Copies a directory tree: a store copied while open is what a crash leaves on disk (its
/// `abort` file included), and the copy can be opened beside the original.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("mkdir {}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{e}")) {
        let entry = entry.unwrap_or_else(|e| panic!("{e}"));
        let dst = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &dst);
        } else {
            std::fs::copy(entry.path(), &dst).unwrap_or_else(|e| panic!("copy: {e}"));
        }
    }
}
