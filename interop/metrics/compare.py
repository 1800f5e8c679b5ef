#!/usr/bin/env python3
"""Metric families and label keys of two Prometheus scrapes, side by side.

    compare.py table COMET_SCRAPE APACHE_SCRAPE       print the Markdown table
    compare.py check COMET_SCRAPE APACHE_SCRAPE DOC   check DOC's table against the scrapes
    compare.py update COMET_SCRAPE APACHE_SCRAPE DOC  rewrite DOC's table from the scrapes

A family is a metric name as its samples give it; a histogram's `_bucket`, `_count` and `_sum`
samples belong to it, and `le` is not a label key of its own. OpenTelemetry's bookkeeping
(`target_info`, `otel_scope_info` and the `otel_scope_name` label on every series) is left out.

The table in DOC sits between `<!-- metrics-compare:begin -->` and `<!-- metrics-compare:end -->`.
`check` fails when a family a scrape served is missing from the table or listed with other label
keys for that side. A family listed for a side but absent from its scrape only warns: Apache
serves some families only while something happens (a producer connected, a timer message due).
"""

import re
import sys

BEGIN = "<!-- metrics-compare:begin -->"
END = "<!-- metrics-compare:end -->"
IGNORED_FAMILIES = {"target_info", "target", "otel_scope_info", "otel_scope"}
IGNORED_LABELS = {"otel_scope_name", "le"}
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"')
NONE = "not served"


def families(path):
    """{family: sorted label keys} of one scrape."""
    types = {}
    keys = {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for line in lines:
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                types[parts[2]] = parts[3]
    samples = [ln for ln in lines if ln and not ln.startswith("#")]
    names = {re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", ln).group(0) for ln in samples}
    for line in samples:
        name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
        family = name
        # A histogram's samples, whatever its TYPE line calls it (OpenTelemetry 1.29 writes the
        # TYPE line without the unit its samples carry).
        for suffix in HISTOGRAM_SUFFIXES:
            base = name[: -len(suffix)]
            if name.endswith(suffix) and (base in types or base + "_bucket" in names):
                family = base
        if family in IGNORED_FAMILIES:
            continue
        brace = line.find("{")
        labels = set()
        if brace >= 0:
            labels = {m.group(1) for m in LABEL.finditer(line[brace : line.rfind("}") + 1])}
        keys.setdefault(family, set()).update(labels - IGNORED_LABELS)
    return {name: " ".join(sorted(labels)) for name, labels in keys.items()}


def table(comet, apache):
    rows = ["| metric | Apache RocketMQ 5.3.3 label keys | Comet label keys |", "|---|---|---|"]
    for name in sorted(set(comet) | set(apache)):
        rows.append(f"| `{name}` | {apache.get(name, NONE)} | {comet.get(name, NONE)} |")
    return "\n".join(rows)


def parse_table(text):
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\| `([^`]+)` \| ([^|]*) \| ([^|]*) \|$", line.strip())
        if m:
            rows[m.group(1)] = (m.group(2).strip(), m.group(3).strip())
    return rows


def doc_block(doc):
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    start = text.index(BEGIN) + len(BEGIN)
    return text, start, text.index(END, start)


def check(comet, apache, doc):
    text, start, end = doc_block(doc)
    listed = parse_table(text[start:end])
    problems = []
    for side, scrape, index in (("Comet", comet, 1), ("Apache", apache, 0)):
        for name, keys in scrape.items():
            if name not in listed:
                problems.append(f"{name} ({side} serves it) is not in the table")
            elif listed[name][index] != keys:
                problems.append(f"{name}: {side} serves keys [{keys}], the table says [{listed[name][index]}]")
        for name, row in listed.items():
            if row[index] != NONE and name not in scrape:
                print(f"compare: note: {name} listed for {side} but not in this scrape", file=sys.stderr)
    for p in problems:
        print(f"compare: {p}", file=sys.stderr)
    return not problems


def main():
    mode, comet_path, apache_path = sys.argv[1:4]
    comet, apache = families(comet_path), families(apache_path)
    if mode == "table":
        print(table(comet, apache))
    elif mode == "check":
        sys.exit(0 if check(comet, apache, sys.argv[4]) else 1)
    elif mode == "update":
        text, start, end = doc_block(sys.argv[4])
        with open(sys.argv[4], "w", encoding="utf-8") as f:
            f.write(text[:start] + "\n" + table(comet, apache) + "\n" + text[end:])
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
