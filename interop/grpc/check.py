#!/usr/bin/env python3
"""Checks what a remoting consumer read (`comet consume --json` lines) against what the gRPC
producer sent (its `SENT i messageId` lines): every message i exactly once, with body
"grpc-body-i", tag TagA, keys "key-i" and "k2-i", property seq=i and the message id of its
receipt as UNIQ_KEY. A line "SENT i messageId dueMs" marks a timer message: it must carry
TIMER_DELIVER_MS=dueMs and be stored no earlier than the timer's precision (1 s) before it.
Prints each difference and exits 1 if there is any.

    check.py COUNT sent.txt consumed.jsonl

With `keys`, compares two such runs instead: the messages of both must carry the same set of
property names (Comet's mapping of gRPC fields against Apache's proxy's).

    check.py keys comet.jsonl apache.jsonl [IGNORED_NAME...]

Names given after the two files are left out of the comparison.
"""

import json
import sys

# How early a timer message may be stored: the wheel's slot length (timerPrecisionMs).
TIMER_PRECISION_MS = 1000


def property_names(path):
    names = set()
    with open(path) as f:
        for line in f:
            if line.strip():
                names |= set(json.loads(line).get("properties", {}))
    return names


def compare_names(comet_path, apache_path, ignored=()):
    comet = property_names(comet_path) - set(ignored)
    apache = property_names(apache_path) - set(ignored)
    for name in sorted(apache - comet):
        print(f"property {name} stored by Apache's proxy, not by Comet")
    for name in sorted(comet - apache):
        print(f"property {name} stored by Comet, not by Apache's proxy")
    if comet != apache:
        return 1
    print(f"grpc check: the same {len(comet)} property names as Apache's proxy")
    return 0


def main():
    if sys.argv[1] == "keys":
        return compare_names(sys.argv[2], sys.argv[3], sys.argv[4:])
    count = int(sys.argv[1])
    sent = {}
    due = {}
    with open(sys.argv[2]) as f:
        for line in f:
            parts = line.split()
            if len(parts) in (3, 4) and parts[0] == "SENT":
                sent[int(parts[1])] = parts[2]
                if len(parts) == 4:
                    due[int(parts[1])] = int(parts[3])
    consumed = {}
    problems = []
    with open(sys.argv[3]) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            msg = json.loads(line)
            body = msg.get("body", "")
            if not body.startswith("grpc-body-"):
                problems.append(f"unexpected body {body!r}")
                continue
            i = int(body[len("grpc-body-"):])
            if i in consumed:
                problems.append(f"message {i} consumed twice")
            consumed[i] = msg
    if len(sent) != count:
        problems.append(f"the producer acknowledged {len(sent)} of {count} messages")
    for i in range(count):
        msg = consumed.get(i)
        if msg is None:
            problems.append(f"message {i} never consumed")
            continue
        props = msg.get("properties", {})
        expect = {
            "tags": ("TagA", msg.get("tags")),
            "keys": (["key-%d" % i, "k2-%d" % i], sorted(msg.get("keys", []), key=lambda k: not k.startswith("key-"))),
            "seq": (str(i), props.get("seq")),
            "UNIQ_KEY": (sent.get(i), props.get("UNIQ_KEY")),
            "msgId": (sent.get(i), msg.get("msgId")),
        }
        if i in due:
            expect["TIMER_DELIVER_MS"] = (str(due[i]), props.get("TIMER_DELIVER_MS"))
            stored = msg.get("storeTimestamp", 0)
            if stored < due[i] - TIMER_PRECISION_MS:
                problems.append(f"message {i}: stored at {stored}, before its time {due[i]}")
        for what, (want, got) in expect.items():
            if want != got:
                problems.append(f"message {i}: {what} is {got!r}, expected {want!r}")
    for p in problems:
        print(p)
    if problems:
        print(f"grpc check: {len(problems)} problems")
        return 1
    timed = " (timer messages, each stored at its time)" if due else ""
    print(f"grpc check: {count} messages consumed with body, tag, keys, property and id{timed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
