#!/usr/bin/env python3
"""Compares two descriptor dumps (Apache's, from DumpDescriptors.java, and Comet's, from the
comet-grpc-proto example dump_descriptors). Prints every difference, message by message and field
by field, then exits 1 if there was any.

    compare.py apache.json comet.json
"""

import json
import sys


def compare_maps(kind, apache, comet, out, describe):
    for name in sorted(set(apache) | set(comet)):
        if name not in comet:
            out.append(f"{kind} {name}: only in Apache's descriptors")
        elif name not in apache:
            out.append(f"{kind} {name}: only in Comet's descriptors")
        else:
            describe(f"{kind} {name}", apache[name], comet[name], out)


def compare_attrs(where, apache, comet, out):
    for key in sorted(set(apache) | set(comet)):
        a, c = apache.get(key), comet.get(key)
        if a != c:
            out.append(f"{where}: {key} is {a!r} in Apache's, {c!r} in Comet's")


def compare_message(where, apache, comet, out):
    if apache.get("map_entry") != comet.get("map_entry"):
        out.append(f"{where}: map_entry {apache.get('map_entry')} vs {comet.get('map_entry')}")
    compare_maps(f"{where} field", apache["fields"], comet["fields"], out, compare_attrs)


def compare_enum(where, apache, comet, out):
    for value in sorted(set(apache) | set(comet)):
        a, c = apache.get(value), comet.get(value)
        if a != c:
            out.append(f"{where} value {value}: {a!r} in Apache's, {c!r} in Comet's")


def compare_service(where, apache, comet, out):
    compare_maps(f"{where} method", apache, comet, out, compare_attrs)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        apache = json.load(f)
    with open(sys.argv[2]) as f:
        comet = json.load(f)
    out = []
    compare_maps("message", apache["messages"], comet["messages"], out, compare_message)
    compare_maps("enum", apache["enums"], comet["enums"], out, compare_enum)
    compare_maps("service", apache["services"], comet["services"], out, compare_service)
    for line in out:
        print(line)
    counts = ", ".join(f"{len(apache[k])} {k}" for k in ("messages", "enums", "services"))
    if out:
        print(f"grpc-descriptors: {len(out)} differences ({counts} in Apache's)")
        return 1
    print(f"grpc-descriptors: identical ({counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
