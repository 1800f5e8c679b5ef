#!/usr/bin/env python3
"""What one flush costs on this disk: pwrite of CHUNK bytes followed by fdatasync, in a file
whose blocks are unwritten (sparse, as a new CommitLog segment), preallocated (fallocate) or
written before (zeroed), and with 1-3 threads flushing the same file at once.

Usage: bench/fsync_probe.py [DIR]   (DIR defaults to the current directory; a scratch file is
created there and removed). It measured the flush costs behind the CommitLog's zero-ahead design.
"""
import os
import sys
import threading
import time

CHUNK = 32 * 1024
ROUNDS = 2000


def one_thread(path, prep):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    size = ROUNDS * CHUNK
    if prep == "sparse":
        os.ftruncate(fd, size)
    elif prep == "falloc":
        os.posix_fallocate(fd, 0, size)
    else:
        zeros = b"\0" * (1 << 20)
        for off in range(0, size, len(zeros)):
            os.pwrite(fd, zeros, off)
        os.fsync(fd)
    buf = os.urandom(CHUNK)
    start = time.perf_counter()
    for i in range(ROUNDS):
        os.pwrite(fd, buf, i * CHUNK)
        os.fdatasync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    os.unlink(path)
    print(f"{prep:7s} 1 thread : {elapsed / ROUNDS * 1e6:7.1f} us per pwrite+fdatasync of {CHUNK} B")


def threads(path, n):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.ftruncate(fd, n * ROUNDS * CHUNK)
    buf = os.urandom(CHUNK)
    latencies = []

    def worker(t):
        for i in range(ROUNDS):
            start = time.perf_counter()
            os.pwrite(fd, buf, (i * n + t) * CHUNK)
            os.fdatasync(fd)
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    workers = [threading.Thread(target=worker, args=(t,)) for t in range(n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    os.close(fd)
    os.unlink(path)
    latencies.sort()
    print(f"sparse  {n} threads: {n * ROUNDS / elapsed:7.0f} fdatasyncs/s, "
          f"p50 {latencies[len(latencies) // 2] * 1e6:6.0f} us")


def main():
    path = os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "fsync_probe.tmp")
    for prep in ("sparse", "falloc", "zeroed"):
        one_thread(path, prep)
    for n in (1, 2, 3):
        threads(path, n)


if __name__ == "__main__":
    main()
