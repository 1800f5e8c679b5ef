#!/usr/bin/env python3
"""Compares what two servers sent the same transaction capture programs (Python 3 stdlib only).

Why: the golden fixtures pin what Apache RocketMQ puts on the wire; `capture.sh` with TARGET=comet
records the same clients against `comet serve`. This script lines the two recordings up, peer by
peer, and prints every difference in the server's side of the transaction commands, with values
that change on every run (offsets, ids, timestamps, client ids) masked so only real differences
remain:

- the half-send responses (header keys), and the answers to END_TRANSACTION (code, remark, or none);
- CHECK_TRANSACTION_STATE: frame (language, version, codec, flag), header (keys, topic, bname) and
  its body, the stored record (sysflag, queue, topic, properties);
- the committed records a consumer pulls from the real topic (sysflag, properties);
- the END_TRANSACTION the client answers the check with (it echoes parts of the check header).

    compare.py EXPECTED_FIXTURES_DIR ACTUAL_FIXTURES_DIR [PEER ...]

Default peers: every `*-tx` directory present in both. Exit status 1 if anything differs.
"""

import json
import os
import struct
import sys

END_TRANSACTION = 37
CHECK_TRANSACTION_STATE = 39
SEND_CODES = (10, 310)
PULL_MESSAGE = 11
RESPONSE_FLAG = 0x1
SUCCESS = 0
# Header values worth comparing literally; any other value is masked to its shape.
LITERAL_HEADER_KEYS = {"topic", "bname", "commitOrRollback", "fromTransactionCheck", "producerGroup",
                       "MSG_REGION", "TRACE_ON"}
# Properties whose values are compared literally; others (ids, offsets, times, and REAL_QID: the
# producer picks queues round-robin from a random start) are masked.
LITERAL_PROPERTIES = {"TRAN_MSG", "WAIT", "REAL_TOPIC", "TRANSACTION_CHECK_TIMES",
                      "MSG_REGION", "TRACE_ON", "PGROUP", "TAGS", "KEYS", "cometTx"}
# Fixed part of a stored record up to BORNHOST: TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG,
# QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP.
RECORD_HEAD = ">iiiiiqqiq"
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20


def mask(value):
    if value is None:
        return None
    if value.lstrip("-").isdigit():
        return "<int>"
    return "<text>" if value else ""


def parse_records(data):
    """Splits a buffer of stored records into dicts (fields the comparison needs)."""
    out, pos = [], 0
    while pos < len(data):
        total, _magic, _crc, queue_id, flag, queue_offset, _phys, sys_flag, _born = \
            struct.unpack_from(RECORD_HEAD, data, pos)
        p = pos + struct.calcsize(RECORD_HEAD)
        p += (16 if sys_flag & BORNHOST_V6_FLAG else 4) + 4 + 8
        p += (16 if sys_flag & STOREHOST_V6_FLAG else 4) + 4
        reconsume, prepared = struct.unpack_from(">iq", data, p)
        p += 12
        (body_len,) = struct.unpack_from(">i", data, p)
        p += 4
        body = data[p:p + body_len].decode("utf-8", "replace")
        p += body_len
        topic_len = data[p]
        topic = data[p + 1:p + 1 + topic_len].decode("utf-8")
        p += 1 + topic_len
        (props_len,) = struct.unpack_from(">h", data, p)
        raw = data[p + 2:p + 2 + props_len].decode("utf-8")
        props = dict(kv.split("\x01", 1) for kv in raw.split("\x02") if "\x01" in kv)
        out.append({"body": body, "topic": topic, "queue_id": queue_id, "flag": flag,
                    "queue_offset": queue_offset, "sys_flag": sys_flag, "reconsume": reconsume,
                    "prepared_offset_set": prepared != 0, "props": props,
                    "props_trailing_separator": raw.endswith("\x02")})
        if total <= 0:
            break
        pos += total
    return out


def load(fixtures, peer):
    d = os.path.join(fixtures, peer)
    frames = []
    with open(os.path.join(d, "frames.jsonl"), encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            e = json.loads(line)
            with open(os.path.join(d, e["file"]), "rb") as bf:
                e["body"] = bf.read()[8 + e["header_len"]:]
            frames.append(e)
    return frames


def ext(e):
    fields = (e.get("header") or {}).get("extFields") or {}
    return dict(fields) if isinstance(fields, list) else fields


def response_to(frames, req):
    for e in frames:
        if (e["flag"] & RESPONSE_FLAG and e["conn"] == req["conn"] and e["opaque"] == req["opaque"]
                and e["direction"] != req["direction"]):
            return e
    return None


def summarize(frames):
    """What the server did, keyed by a stable path, values masked where they vary per run."""
    s = {}
    requests = [e for e in frames if not e["flag"] & RESPONSE_FLAG]
    for req in requests:
        if req["code"] in SEND_CODES:
            props = ext(req).get("properties") or ext(req).get("i") or ""
            outcome = dict(kv.split("\x01", 1) for kv in props.split("\x02") if "\x01" in kv).get("cometTx")
            rsp = response_to(frames, req)
            if rsp is not None:
                s["half send %s: response code" % outcome] = rsp["code"]
                s["half send %s: response keys" % outcome] = sorted(ext(rsp))
        elif req["code"] == END_TRANSACTION and req["direction"] == "c2s":
            h = ext(req)
            what = "END_TRANSACTION commitOrRollback=%s fromTransactionCheck=%s" % (
                h.get("commitOrRollback"), h.get("fromTransactionCheck"))
            rsp = response_to(frames, req)
            s[what + ": answer"] = None if rsp is None else (rsp["code"], rsp["header"].get("remark"))
            if h.get("fromTransactionCheck") == "true":
                s[what + ": client echoed topic"] = h.get("topic")
        elif req["code"] == CHECK_TRANSACTION_STATE and req["direction"] == "s2c":
            for k in ("language", "version", "serialize_type", "flag"):
                s["CHECK frame %s" % k] = req[k]
            h = ext(req)
            s["CHECK header keys"] = sorted(h)
            for k, v in h.items():
                s["CHECK header %s" % k] = v if k in LITERAL_HEADER_KEYS else mask(v)
            for r in parse_records(req["body"]):
                for k in ("topic", "sys_flag", "flag", "reconsume", "prepared_offset_set",
                          "props_trailing_separator"):
                    s["CHECK body %s" % k] = r[k]
                s["CHECK body queue_id = REAL_QID"] = str(r["queue_id"]) == r["props"].get("REAL_QID")
                s["CHECK body queue_offset = header tranStateTableOffset"] = \
                    str(r["queue_offset"]) == h.get("tranStateTableOffset")
                for k, v in r["props"].items():
                    s["CHECK body property %s" % k] = v if k in LITERAL_PROPERTIES else mask(v)
        elif req["code"] == PULL_MESSAGE:
            rsp = response_to(frames, req)
            if rsp is None or rsp["code"] != SUCCESS:
                continue
            for r in parse_records(rsp["body"]):
                what = "committed %s" % r["body"]
                s[what + ": sys_flag"] = r["sys_flag"]
                s[what + ": prepared offset set"] = r["prepared_offset_set"]
                for k, v in r["props"].items():
                    s["%s: property %s" % (what, k)] = v if k in LITERAL_PROPERTIES else mask(v)
    return s


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: compare.py EXPECTED_FIXTURES_DIR ACTUAL_FIXTURES_DIR [PEER ...]")
    expected_dir, actual_dir = sys.argv[1], sys.argv[2]
    peers = sys.argv[3:] or sorted(
        p for p in os.listdir(expected_dir)
        if p.endswith("-tx") and os.path.isdir(os.path.join(actual_dir, p)))
    differences = 0
    for peer in peers:
        expected = summarize(load(expected_dir, peer))
        actual = summarize(load(actual_dir, peer))
        for key in sorted(set(expected) | set(actual)):
            a, b = expected.get(key, "<absent>"), actual.get(key, "<absent>")
            if a != b:
                differences += 1
                print("%s: %s: expected %r, actual %r" % (peer, key, a, b))
    print("%d difference(s) over %d peer(s)" % (differences, len(peers)))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
