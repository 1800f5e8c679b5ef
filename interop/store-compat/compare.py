#!/usr/bin/env python3
"""Checks for interop/store-compat/run.sh (python3 standard library only).

Subcommands:
  keys MANIFEST                     print "topic<TAB>key" for every KEYS entry and UNIQ_KEY of the
                                    Apache producer's manifest (input of store_dump --query-keys)
  apache-to-comet MANIFEST DUMP --recovery normal|abnormal
                                    check that every message the Apache producer was acknowledged is
                                    in Comet's dump of Apache's store, at the same queue offset, with
                                    the same body, tags, keys, properties and ids; that the
                                    ConsumeQueue units agree with their records; that Comet's index
                                    finds every key; and that the recovery path was the expected one
  fingerprint STORE OUT             record SHA-256 of every ConsumeQueue/index file of a store and of
                                    the CommitLog up to its written end
  fingerprint-check OUT STORE       check those files are unchanged (Apache neither truncated nor
                                    rewrote what Comet wrote)

Every check prints one summary line; the exit status is 1 if anything did not match.
"""

import hashlib
import json
import os
import sys
from collections import defaultdict

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
COMPRESSED_FLAG = 0x1
MAX_SHOWN = 40
# store_dump's QUERY_MAX_NUM: most hits one index lookup returns.
QUERY_MAX_NUM = 64


def java_string_hash(s):
    """Java String.hashCode (UTF-16 code units, wrapping i32), as the ConsumeQueue tagsCode."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def split_keys(keys):
    return [k for k in (keys or "").split(" ") if k]


def stored_uniq_key(e):
    """The UNIQ_KEY a reader sees. For a member of a batch Apache 5.3.3 appends the batch's own
    properties after the member's, so the batch's UNIQ_KEY comes last and wins."""
    return e.get("storedUniqKey", e["uniqKey"])


def commit_log_offset(e):
    """The CommitLog offset encoded in the last 16 hex digits of an offset message id."""
    return int(e["offsetMsgId"][-16:], 16)


def index_keys(e):
    return split_keys(e.get("keys")) + [stored_uniq_key(e)]


def cmd_keys(manifest_path):
    seen = set()
    for e in read_jsonl(manifest_path):
        for key in index_keys(e):
            pair = (e["topic"], key)
            if key and pair not in seen:
                seen.add(pair)
                print(f"{e['topic']}\t{key}")
    return 0


class Checker:
    def __init__(self, label):
        self.label = label
        self.failures = []

    def expect(self, where, what, want, got):
        if want != got:
            self.failures.append(f"{where} {what}: want {want!r}, got {got!r}")

    def fail(self, message):
        self.failures.append(message)

    def report(self, summary):
        for f in self.failures[:MAX_SHOWN]:
            print(f"MISMATCH [{self.label}] {f}")
        if len(self.failures) > MAX_SHOWN:
            print(f"MISMATCH [{self.label}] ... {len(self.failures) - MAX_SHOWN} more")
        print(f"{self.label}: {summary}, {len(self.failures)} mismatches")
        return 0 if not self.failures else 1


def check_record(c, where, e, m):
    """The fields every dumped message must agree on with its manifest entry."""
    c.expect(where, "uniqKey", stored_uniq_key(e), m["uniqKey"])
    if "storedUniqKey" in e and f"UNIQ_KEY\x01{e['uniqKey']}\x02" not in m["rawProperties"]:
        c.fail(f"{where}: the member's own UNIQ_KEY {e['uniqKey']} is not in the stored properties")
    c.expect(where, "offsetMsgId", e["offsetMsgId"], m["offsetMsgId"])
    body = bytes.fromhex(m["bodyHex"])
    c.expect(where, "body sha256", e["bodySha256"], hashlib.sha256(body).hexdigest())
    c.expect(where, "body length", e["bodyLen"], len(body))
    c.expect(where, "tags", e["tags"], m["tags"])
    c.expect(where, "keys", e["keys"], m["keys"])
    c.expect(where, "flag", e["flag"], m["flag"])
    for k, v in e["properties"].items():
        c.expect(where, f"property {k}", v, m["properties"].get(k))
    c.expect(where, "body CRC ok", True, m["bodyCrcOk"])
    # The ConsumeQueue unit and the record it points at must agree.
    c.expect(where, "record topic", m["topic"], m["recordTopic"])
    c.expect(where, "record queueId", m["queueId"], m["recordQueueId"])
    c.expect(where, "record queueOffset", m["queueOffset"], m["recordQueueOffset"])
    c.expect(where, "CQ commitLogOffset", m["commitLogOffset"], m["cqCommitLogOffset"])
    c.expect(where, "CQ size", m["storeSize"], m["cqSize"])


def cmd_apache_to_comet(manifest_path, dump_path, recovery):
    c = Checker(f"apache->comet ({recovery} recovery)")
    manifest = read_jsonl(manifest_path)
    dump = read_jsonl(dump_path)
    msgs = {}
    per_queue = defaultdict(int)
    queries = {}
    summary = None
    rec = None
    for d in dump:
        kind = d.get("kind")
        if kind == "msg":
            msgs[(d["topic"], d["queueId"], d["queueOffset"])] = d
            per_queue[(d["topic"], d["queueId"])] += 1
        elif kind == "query":
            queries[(d["topic"], d["key"])] = {h["commitLogOffset"] for h in d["hits"]}
        elif kind == "summary":
            summary = d
        elif kind == "recovery":
            rec = d
    if rec is None or summary is None:
        c.fail("dump has no recovery or summary line (store_dump did not finish)")
        return c.report("dump incomplete")
    c.expect("recovery", "abnormal", recovery == "abnormal", rec["abnormal"])
    c.expect("recovery", "corruption", None, rec["corruption"])
    c.expect("recovery", "repaired queues", 0, rec["repairedQueues"])
    for p in summary["problems"]:
        c.fail(f"store_dump: {p}")

    # Which messages hold each (topic, key): what an index lookup may return.
    holders = defaultdict(set)
    for e in manifest:
        for k in index_keys(e):
            holders[(e["topic"], k)].add(commit_log_offset(e))
    compared = 0
    lookups = 0
    want_per_queue = defaultdict(int)
    for e in manifest:
        kind = e["kind"]
        key = (e["topic"], e["queueId"], e["queueOffset"])
        where = "{}/{}@{} ({})".format(*key, kind)
        if kind in ("msg", "delay-delivered"):
            want_per_queue[(e["topic"], e["queueId"])] += 1
        m = msgs.get(key)
        if m is None:
            c.fail(f"{where}: not found through Comet's ConsumeQueue")
            continue
        compared += 1
        check_record(c, where, e, m)
        if kind == "delay-original":
            props = m["properties"]
            c.expect(where, "REAL_TOPIC", e["realTopic"], props.get("REAL_TOPIC"))
            c.expect(where, "REAL_QID", str(e["realQueueId"]), props.get("REAL_QID"))
            c.expect(where, "CQ tagsCode (delivery time)", m["storeTimestamp"] + e["delayMillis"], m["cqTagsCode"])
        else:
            c.expect(where, "CQ tagsCode", java_string_hash(e["tags"]), m["cqTagsCode"])
            c.expect(where, "compressed flag", e["compressed"], bool(m["sysFlag"] & COMPRESSED_FLAG))
        for k in index_keys(e):
            lookups += 1
            hits = queries.get((e["topic"], k))
            if hits is None:
                c.fail(f"{where}: index key {e['topic']}#{k} was not queried")
            elif len(holders[(e["topic"], k)]) <= QUERY_MAX_NUM and commit_log_offset(e) not in hits:
                c.fail(f"{where}: Comet's index lookup of {e['topic']}#{k} misses it (got {len(hits)} hits)")
    # A lookup returns at most QUERY_MAX_NUM messages (newest first), each really holding the key.
    for (topic, k), hits in sorted(queries.items()):
        want = holders.get((topic, k), set())
        c.expect(f"index {topic}#{k}", "hit count", min(len(want), QUERY_MAX_NUM), len(hits))
        if not hits <= want:
            c.fail(f"index {topic}#{k}: returned messages without that key: {sorted(hits - want)[:3]}")
    for q, n in sorted(want_per_queue.items()):
        c.expect(f"{q[0]}/{q[1]}", "messages in queue", n, per_queue.get(q, 0))
    return c.report(
        f"{len(manifest)} manifest entries, {compared} messages compared, {lookups} index lookups, "
        f"{summary['messages']} messages dumped from {summary['queues']} queues"
    )


def sha256_file(path, limit=None):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        remaining = limit
        while remaining is None or remaining > 0:
            chunk = f.read(1 << 20 if remaining is None else min(1 << 20, remaining))
            if not chunk:
                break
            h.update(chunk)
            if remaining is not None:
                remaining -= len(chunk)
    return h.hexdigest()


def fingerprint(store, commit_log_end):
    out = {}
    for sub in ("consumequeue", "index"):
        base = os.path.join(store, sub)
        for dirpath, _, files in os.walk(base):
            for name in files:
                path = os.path.join(dirpath, name)
                out[os.path.relpath(path, store)] = sha256_file(path)
    # The CommitLog up to where Comet wrote: segment by segment, only the written prefix.
    cl = os.path.join(store, "commitlog")
    for name in sorted(os.listdir(cl)):
        start = int(name)
        if start >= commit_log_end:
            continue
        size = os.path.getsize(os.path.join(cl, name))
        out[f"commitlog/{name}[:{min(size, commit_log_end - start)}]"] = sha256_file(
            os.path.join(cl, name), min(size, commit_log_end - start)
        )
    return out


def cmd_fingerprint(store, out_path, commit_log_end):
    fp = fingerprint(store, commit_log_end)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"commitLogEnd": commit_log_end, "files": fp}, f, indent=1, sort_keys=True)
    return 0


def cmd_fingerprint_check(fp_path, store):
    c = Checker("comet->apache (store files after Apache)")
    with open(fp_path, encoding="utf-8") as f:
        before = json.load(f)
    after = fingerprint(store, before["commitLogEnd"])
    for name, digest in sorted(before["files"].items()):
        if name not in after:
            c.fail(f"{name}: deleted by Apache")
        elif after[name] != digest:
            c.fail(f"{name}: rewritten by Apache")
    return c.report(f"{len(before['files'])} Comet-written files checked unchanged")


def main(argv):
    if len(argv) == 2 and argv[0] == "keys":
        return cmd_keys(argv[1])
    if len(argv) == 5 and argv[0] == "apache-to-comet" and argv[3] == "--recovery" and argv[4] in ("normal", "abnormal"):
        return cmd_apache_to_comet(argv[1], argv[2], argv[4])
    if len(argv) == 4 and argv[0] == "fingerprint":
        return cmd_fingerprint(argv[1], argv[2], int(argv[3]))
    if len(argv) == 3 and argv[0] == "fingerprint-check":
        return cmd_fingerprint_check(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
