#!/usr/bin/env python3
"""Copies the frames worth keeping from a raw proxy recording into a fixture directory.

A capture run records hundreds of frames (periodic heartbeats, route refreshes, long polls). The
golden tests need one or a few of each interesting command, each request together with its response,
so this script selects by request code, pairs responses to requests by (connection, opaque, and
opposite direction: a broker's own requests such as CHECK_TRANSACTION_STATE number their opaques
independently of the client's, so one opaque can occur both ways on a connection),
renumbers the kept frames in capture order and writes a trimmed frames.jsonl next to them (with the
request code added to each response, since a response only carries its status code).

    select_frames.py RAW_DIR FIXTURE_DIR
"""

import json
import os
import shutil
import sys

# request code -> (name, how many request/response pairs to keep at most)
KEEP = {
    105: ("GET_ROUTEINFO_BY_TOPIC", 3),
    34: ("HEART_BEAT", 2),
    10: ("SEND_MESSAGE", 3),
    310: ("SEND_MESSAGE_V2", 3),
    320: ("SEND_BATCH_MESSAGE", 2),
    11: ("PULL_MESSAGE", 3),
    361: ("LITE_PULL_MESSAGE", 2),
    14: ("QUERY_CONSUMER_OFFSET", 3),
    15: ("UPDATE_CONSUMER_OFFSET", 3),
    38: ("GET_CONSUMER_LIST_BY_GROUP", 2),
    35: ("UNREGISTER_CLIENT", 2),
    40: ("NOTIFY_CONSUMER_IDS_CHANGED", 1),
    # Transactions: the producer's END_TRANSACTION after each local transaction (3) plus its answers
    # to the broker's checks, and the broker's CHECK_TRANSACTION_STATE requests (s2c).
    37: ("END_TRANSACTION", 6),
    39: ("CHECK_TRANSACTION_STATE", 3),
}
# Pull requests are kept preferably when their response found messages (the body then holds stored
# records written by the broker); at most this many pulls that found nothing are kept as well.
MAX_EMPTY_PULLS = 1
PULL_CODES = (11, 361)
# Of the heartbeats, the first one is kept, and the first one that registers a push consumer (a
# producer starts heart-beating before the consumers exist, and a 5.x pull consumer has its own
# client instance with its own heartbeat).
HEART_BEAT = 34
RESPONSE_FLAG = 0x1
SUCCESS = 0


def registers_consumer(raw, entry):
    """True if a HEART_BEAT frame's JSON body lists a push consumer (CONSUME_PASSIVELY)."""
    with open(os.path.join(raw, entry["file"]), "rb") as f:
        frame = f.read()
    body = frame[8 + entry["header_len"]:]
    try:
        consumers = json.loads(body.decode("utf-8")).get("consumerDataSet") or []
        return any(c.get("consumeType") == "CONSUME_PASSIVELY" for c in consumers)
    except ValueError:
        return False


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: select_frames.py RAW_DIR FIXTURE_DIR")
    raw, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(raw, "frames.jsonl"), encoding="utf-8") as f:
        frames = [json.loads(line) for line in f if line.strip()]
    frames.sort(key=lambda e: e["seq"])

    requests, responses = [], {}
    for e in frames:
        if "error" in e or e.get("code") is None:
            continue
        key = (e["label"], e["conn"], e["opaque"], e["direction"])
        if e["flag"] & RESPONSE_FLAG:
            responses.setdefault(key, e)
        else:
            requests.append(e)

    kept, counts, empty_pulls = [], {}, 0
    for req in requests:
        code = req["code"]
        if code not in KEEP:
            continue
        answer_direction = "s2c" if req["direction"] == "c2s" else "c2s"
        rsp = responses.get((req["label"], req["conn"], req["opaque"], answer_direction))
        if code in PULL_CODES:
            if rsp is None:
                continue  # a long poll still pending at shutdown
            if rsp["code"] != SUCCESS or rsp.get("body_len", 0) == 0:
                if empty_pulls >= MAX_EMPTY_PULLS:
                    continue
                empty_pulls += 1
        if counts.get(code, 0) >= KEEP[code][1]:
            continue
        if code == HEART_BEAT and counts.get(code, 0) > 0 and not registers_consumer(raw, req):
            continue
        counts[code] = counts.get(code, 0) + 1
        kept.append((req, None))
        if rsp is not None:
            kept.append((rsp, code))

    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    kept.sort(key=lambda pair: pair[0]["seq"])
    with open(os.path.join(out, "frames.jsonl"), "w", encoding="utf-8") as index:
        for n, (e, request_code) in enumerate(kept, 1):
            entry = dict(e)
            entry["raw_seq"] = e["seq"]
            entry["seq"] = n
            name = "%04d-%s-%s.bin" % (n, e["direction"], e["code"])
            entry["file"] = name
            if request_code is not None:
                entry["request_code"] = request_code
            shutil.copyfile(os.path.join(raw, e["file"]), os.path.join(out, name))
            index.write(json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n")
    summary = ", ".join("%s x%d" % (KEEP[c][0], n) for c, n in sorted(counts.items()))
    print("%s: kept %d frames (%s)" % (out, len(kept), summary))


if __name__ == "__main__":
    main()
