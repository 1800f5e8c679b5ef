#!/usr/bin/env python3
"""Compares the CommitLog segment files of a master and its slave, byte for byte.

    compare_commitlogs.py MASTER_COMMITLOG_DIR SLAVE_COMMITLOG_DIR WRITTEN_END SEGMENT_SIZE

WRITTEN_END is the master's CommitLog end (commitLogMaxOffset) once the slave caught up. Every
segment file (named by its 20-digit start offset) that starts below WRITTEN_END must exist on
both sides with SEGMENT_SIZE bytes, and the files are compared whole. Both brokers' segments
are full-size files that read as zeros past the written end (Apache's are zero-filled, Comet's
sparse), so whole files are expected to match; when they differ only past WRITTEN_END, that is
reported and the comparison up to WRITTEN_END decides. A segment present on one side only must
start at or after WRITTEN_END and hold only zeros: Apache allocates the next segment ahead of
need. Prints one summary line; exits 1 on any mismatch.
"""

import os
import re
import sys

CHUNK = 1 << 20


def segments(directory):
    return {name for name in os.listdir(directory) if re.fullmatch(r"\d{20}", name)}


def all_zero(path):
    with open(path, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                return True
            if chunk.count(0) != len(chunk):
                return False


def first_difference(a_path, b_path):
    """Offset within the files of the first differing byte, or None when they are equal."""
    with open(a_path, "rb") as a, open(b_path, "rb") as b:
        pos = 0
        while True:
            x, y = a.read(CHUNK), b.read(CHUNK)
            if x != y:
                n = min(len(x), len(y))
                for i in range(n):
                    if x[i] != y[i]:
                        return pos + i
                return pos + n
            if not x:
                return None
            pos += len(x)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    master_dir, slave_dir = sys.argv[1], sys.argv[2]
    written_end, segment = int(sys.argv[3]), int(sys.argv[4])
    master, slave = segments(master_dir), segments(slave_dir)
    problems, notes = [], []
    compared = whole = 0
    for name in sorted(master | slave):
        start = int(name)
        if name not in master or name not in slave:
            side, path = ("master", os.path.join(master_dir, name)) if name in master else (
                "slave", os.path.join(slave_dir, name))
            if start >= written_end and all_zero(path):
                notes.append(f"{name} only on the {side} (allocated ahead, all zero)")
            else:
                problems.append(f"{name} only on the {side}")
            continue
        a, b = os.path.join(master_dir, name), os.path.join(slave_dir, name)
        sizes = (os.path.getsize(a), os.path.getsize(b))
        if sizes != (segment, segment):
            problems.append(f"{name}: sizes master {sizes[0]} slave {sizes[1]}, expected {segment}")
            continue
        diff = first_difference(a, b)
        compared += segment
        if diff is None:
            whole += 1
        elif start + diff >= written_end:
            notes.append(f"{name} differs only past the written end, first at offset {start + diff}")
        else:
            with open(a, "rb") as fa, open(b, "rb") as fb:
                fa.seek(diff)
                fb.seek(diff)
                problems.append(f"{name}: first difference at CommitLog offset {start + diff} "
                                f"(master {fa.read(16).hex()} slave {fb.read(16).hex()})")
    written_segments = sum(1 for n in master if int(n) < written_end)
    if written_segments == 0:
        problems.append("no master segment holds written data")
    summary = (f"{written_segments} segments written up to offset {written_end}, "
               f"{compared} bytes compared, {whole} files identical whole")
    if notes:
        summary += "; " + "; ".join(notes)
    if problems:
        print(f"commitlog compare FAILED: {summary}; " + "; ".join(problems))
        sys.exit(1)
    print(f"commitlog identical: {summary}")


if __name__ == "__main__":
    main()
