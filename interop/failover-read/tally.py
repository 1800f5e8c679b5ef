#!/usr/bin/env python3
"""Counts the bodies a consumer received (one per line of FILE) against what was sent.

    tally.py FILE --expect PREFIX:COUNT [--expect ...] [--earlier PREFIX:COUNT] [--complete]

Bodies PREFIX0 .. PREFIX<COUNT-1> of every --expect are the messages the consumer must receive;
those of --earlier are messages it must not receive again (its group committed them before).
Prints one line: received (lines), unique, missing (expected bodies never received), duplicates
(deliveries of an expected body past its first), earlier (deliveries of --earlier bodies) and
unknown (any other body). With --complete it only tells, by its exit status, whether nothing
expected is missing (for polling). An incomplete last line (still being written) is not counted.
"""
import argparse
import collections
import sys


def bodies(spec):
    prefix, _, count = spec.rpartition(":")
    return {f"{prefix}{i}" for i in range(int(count))}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--expect", action="append", default=[])
    parser.add_argument("--earlier", action="append", default=[])
    parser.add_argument("--complete", action="store_true")
    args = parser.parse_args()
    expected = set().union(*(bodies(s) for s in args.expect))
    earlier = set().union(*(bodies(s) for s in args.earlier))
    try:
        with open(args.file, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        text = ""
    lines = text.split("\n")[:-1]  # the part after the last newline is not a whole line yet
    counts = collections.Counter(lines)
    got = expected & counts.keys()
    missing = len(expected) - len(got)
    if args.complete:
        sys.exit(0 if missing == 0 else 1)
    duplicates = sum(counts[b] - 1 for b in got)
    again = sum(counts[b] for b in earlier & counts.keys())
    unknown = sum(n for b, n in counts.items() if b not in expected and b not in earlier)
    print(f"received={len(lines)} unique={len(got)} missing={missing} duplicates={duplicates} "
          f"earlier={again} unknown={unknown}")


if __name__ == "__main__":
    main()
