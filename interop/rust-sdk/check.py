#!/usr/bin/env python3
"""Checks the rows of interop/rust-sdk/run.sh. The Rust SDK's producer prints `SENT i messageId`
for message i (body "rust-sdk-body-i", tag TagA, keys "key-i" and "k2-i", property seq=i), or
`SENT i messageId dueMs` for a timer message.

    check.py consumed COUNT sent.txt consumed.jsonl [--fifo GROUP]

What a remoting consumer read (`comet consume --json` lines): every message exactly once, with its
body, tag, keys, property and its receipt's message id as UNIQ_KEY. A timer message must carry
TIMER_DELIVER_MS=dueMs and be stored no earlier than the timer's precision (1 s) before it. With
--fifo, every message must carry the message group as __SHARDINGKEY and sit in one queue, in the
order it was sent.

    check.py received COUNT sent.txt received.txt

What the SDK's SimpleConsumer received and acked (its `RECV {json}` lines): every message exactly
once, on its first delivery attempt, with the same message id, body, tag, keys and property.

    check.py keys comet.jsonl apache.jsonl [IGNORED_NAME...]

Two `consumed` runs: the messages of both carry the same set of property names.

Prints each difference and exits 1 if there is any.
"""

import json
import sys

# How early a timer message may be stored: the wheel's slot length (timerPrecisionMs).
TIMER_PRECISION_MS = 1000
BODY_PREFIX = "rust-sdk-body-"


def read_sent(path):
    sent, due = {}, {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) in (3, 4) and parts[0] == "SENT":
                sent[int(parts[1])] = parts[2]
                if len(parts) == 4:
                    due[int(parts[1])] = int(parts[3])
    return sent, due


def index_by_body(messages, problems):
    """Maps message number to the one message with that body, noting repeats and strays."""
    found = {}
    for msg in messages:
        body = msg.get("body", "")
        if not body.startswith(BODY_PREFIX):
            problems.append(f"unexpected body {body!r}")
            continue
        i = int(body[len(BODY_PREFIX):])
        if i in found:
            problems.append(f"message {i} delivered twice")
        found[i] = msg
    return found


def expected_keys(i):
    return ["key-%d" % i, "k2-%d" % i]


def check_consumed(count, sent_path, consumed_path, fifo_group=None):
    sent, due = read_sent(sent_path)
    problems = []
    with open(consumed_path) as f:
        consumed = index_by_body((json.loads(l) for l in f if l.strip()), problems)
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
            "keys": (sorted(expected_keys(i)), sorted(msg.get("keys", []))),
            "seq": (str(i), props.get("seq")),
            "UNIQ_KEY": (sent.get(i), props.get("UNIQ_KEY")),
            "msgId": (sent.get(i), msg.get("msgId")),
        }
        if fifo_group is not None:
            expect["__SHARDINGKEY"] = (fifo_group, props.get("__SHARDINGKEY"))
        if i in due:
            expect["TIMER_DELIVER_MS"] = (str(due[i]), props.get("TIMER_DELIVER_MS"))
            stored = msg.get("storeTimestamp", 0)
            if stored < due[i] - TIMER_PRECISION_MS:
                problems.append(f"message {i}: stored at {stored}, before its time {due[i]}")
        for what, (want, got) in expect.items():
            if want != got:
                problems.append(f"message {i}: {what} is {got!r}, expected {want!r}")
    if fifo_group is not None and consumed:
        queues = {m.get("queueId") for m in consumed.values()}
        if len(queues) != 1:
            problems.append(f"one message group spread over queues {sorted(queues)}")
        offsets = [consumed[i].get("queueOffset") for i in sorted(consumed)]
        if offsets != sorted(offsets):
            problems.append("the group's messages are stored out of their send order")
    return report(problems, f"{count} messages consumed with body, tag, keys, property and id"
                  + (" (timer messages, each stored at its time)" if due else "")
                  + (f" (group {fifo_group}, one queue, in send order)" if fifo_group else ""))


def check_received(count, sent_path, received_path):
    sent, _ = read_sent(sent_path)
    problems = []
    with open(received_path) as f:
        lines = [json.loads(l[len("RECV "):]) for l in f if l.startswith("RECV ")]
    received = index_by_body(lines, problems)
    if len(sent) != count:
        problems.append(f"the producer acknowledged {len(sent)} of {count} messages")
    for i in range(count):
        msg = received.get(i)
        if msg is None:
            problems.append(f"message {i} never received")
            continue
        expect = {
            "id": (sent.get(i), msg.get("id")),
            "tag": ("TagA", msg.get("tag")),
            "keys": (sorted(expected_keys(i)), sorted(msg.get("keys", []))),
            "seq": (str(i), msg.get("properties", {}).get("seq")),
            "delivery attempt": (1, msg.get("attempt")),
        }
        for what, (want, got) in expect.items():
            if want != got:
                problems.append(f"message {i}: {what} is {got!r}, expected {want!r}")
    return report(problems, f"{count} messages received once and acked with id, body, tag, keys"
                  " and property, each on its first attempt")


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
    problems = [f"property {n} stored by Apache's proxy, not by Comet" for n in sorted(apache - comet)]
    problems += [f"property {n} stored by Comet, not by Apache's proxy" for n in sorted(comet - apache)]
    return report(problems, f"the same {len(comet)} property names as Apache's proxy")


def report(problems, success):
    for p in problems:
        print(p)
    if problems:
        print(f"rust-sdk check: {len(problems)} problems")
        return 1
    print(f"rust-sdk check: {success}")
    return 0


def main():
    what, args = sys.argv[1], sys.argv[2:]
    if what == "keys":
        return compare_names(args[0], args[1], args[2:])
    if what == "consumed":
        fifo = args[4] if len(args) == 5 and args[3] == "--fifo" else None
        return check_consumed(int(args[0]), args[1], args[2], fifo)
    if what == "received":
        return check_received(int(args[0]), args[1], args[2])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
