//! Store benchmarks: append throughput (ASYNC_FLUSH, 128 B and 1 KiB), SYNC_FLUSH group commit
//! with 1/8/64 concurrent writers, read throughput of one queue, and recovery time of a 256 MiB
//! log (normal and worst-case abnormal).
//!
//! Run: `cargo bench -p comet-store --bench store -- --measurement-time 3 --warm-up-time 1`

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use comet_protocol::message::MessageExt;
use comet_store::{FlushDiskType, MessageStore, MessageStoreConfig, PutMessageStatus};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// Segment size for the benches (smaller than production so files stay manageable).
const BENCH_SEGMENT: usize = 64 * 1024 * 1024;
/// Size of the log whose recovery is timed.
const RECOVERY_LOG_BYTES: usize = 256 * 1024 * 1024;
/// Messages pre-loaded for the read benchmark.
const READ_PRELOAD: u64 = 100_000;

fn config(root: &Path, mode: FlushDiskType) -> MessageStoreConfig {
    let mut cfg = MessageStoreConfig::with_root(root);
    cfg.mapped_file_size_commit_log = BENCH_SEGMENT;
    cfg.flush_disk_type = mode;
    cfg.delete_when = "99".into();
    cfg.clean_resource_interval = Duration::from_secs(3600);
    cfg.max_hash_slot_num = 500_000;
    cfg.max_index_num = 2_000_000;
    cfg
}

fn message(queue_id: i32, body: &Bytes) -> MessageExt {
    let mut m = MessageExt::new("BenchTopic", body.clone());
    m.queue_id = queue_id;
    m.born_host = SocketAddr::from(([127, 0, 0, 1], 40_000));
    m.store_host = SocketAddr::from(([10, 0, 0, 1], 10_911));
    m.properties.insert("TAGS", "TagA");
    m
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
}

fn append_async(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("append_async");
    for size in [128usize, 1024] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = MessageStore::open(config(dir.path(), FlushDiskType::AsyncFlush))
            .unwrap_or_else(|e| panic!("{e}"));
        let body = Bytes::from(vec![b'x'; size]);
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(BenchmarkId::from_parameter(size), &size, |b, _| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let r = store.put_message(message(0, &body)).await;
                        debug_assert_eq!(r.status, PutMessageStatus::PutOk);
                    }
                    start.elapsed()
                })
            });
        });
        let _ = store.shutdown();
    }
    group.finish();
}

fn sync_group_commit(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("sync_flush_group_commit_1KiB");
    for writers in [1u64, 8, 64] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = MessageStore::open(config(dir.path(), FlushDiskType::SyncFlush))
            .unwrap_or_else(|e| panic!("{e}"));
        let body = Bytes::from(vec![b'y'; 1024]);
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(
            BenchmarkId::new("writers", writers),
            &writers,
            |b, &writers| {
                b.iter_custom(|iters| {
                    let per_writer = iters.div_ceil(writers);
                    rt.block_on(async {
                        let start = Instant::now();
                        let mut tasks = Vec::new();
                        for w in 0..writers {
                            let store = Arc::clone(&store);
                            let body = body.clone();
                            tasks.push(tokio::spawn(async move {
                                for _ in 0..per_writer {
                                    let r = store.put_message(message((w % 8) as i32, &body)).await;
                                    debug_assert_eq!(r.status, PutMessageStatus::PutOk);
                                }
                            }));
                        }
                        for t in tasks {
                            let _ = t.await;
                        }
                        // Report per message actually written.
                        start
                            .elapsed()
                            .mul_f64(iters as f64 / (per_writer * writers) as f64)
                    })
                });
            },
        );
        let _ = store.shutdown();
    }
    group.finish();
}

fn read_by_queue(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = MessageStore::open(config(dir.path(), FlushDiskType::AsyncFlush))
        .unwrap_or_else(|e| panic!("{e}"));
    let body = Bytes::from(vec![b'z'; 1024]);
    rt.block_on(async {
        for _ in 0..READ_PRELOAD {
            store.put_message(message(1, &body)).await;
        }
    });
    store.wait_dispatched(store.max_phy_offset(), Duration::from_secs(60));
    let mut group = c.benchmark_group("read_queue_1KiB");
    group.throughput(Throughput::Elements(32));
    let mut offset = 0i64;
    group.bench_function("get_message_32", |b| {
        b.iter(|| {
            let r = store.get_message("g", "BenchTopic", 1, offset, 32, 1 << 20, None);
            offset = if r.next_begin_offset >= READ_PRELOAD as i64 {
                0
            } else {
                r.next_begin_offset
            };
            r.msg_count
        });
    });
    group.finish();
    let _ = store.shutdown();
}

fn recovery(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let body = Bytes::from(vec![b'r'; 1024]);
    {
        let store = MessageStore::open(config(dir.path(), FlushDiskType::AsyncFlush))
            .unwrap_or_else(|e| panic!("{e}"));
        rt.block_on(async {
            let mut q = 0;
            while store.max_phy_offset() < RECOVERY_LOG_BYTES as i64 {
                store.put_message(message(q % 8, &body)).await;
                q += 1;
            }
        });
        let _ = store.shutdown();
    }
    let mut group = c.benchmark_group("recovery_256MiB");
    group.sample_size(10);
    group.bench_function("normal_open", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let store = MessageStore::open(config(dir.path(), FlushDiskType::AsyncFlush))
                    .unwrap_or_else(|e| panic!("{e}"));
                total += start.elapsed();
                let _ = store.shutdown();
            }
            total
        });
    });
    group.bench_function("abnormal_open_full_verify", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                // No checkpoint and an abort file: every segment is verified and reconciled.
                let _ = std::fs::remove_file(dir.path().join("checkpoint"));
                let _ = std::fs::write(dir.path().join("abort"), b"0");
                let start = Instant::now();
                let store = MessageStore::open(config(dir.path(), FlushDiskType::AsyncFlush))
                    .unwrap_or_else(|e| panic!("{e}"));
                total += start.elapsed();
                assert_eq!(store.recovery_report().verify_from, 0);
                let _ = store.shutdown();
            }
            total
        });
    });
    group.finish();
}

criterion_group!(
    benches,
    append_async,
    sync_group_commit,
    read_by_queue,
    recovery
);
criterion_main!(benches);
