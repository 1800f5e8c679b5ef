#!/usr/bin/env python3
"""Compares the answers interop/cli/run.sh collected from two targets.

Usage: compare.py <answers dir> <target> [<target> ...]

Each command's --json answer (or its failure) is reduced to what both targets must agree on;
addresses, timestamps, ids, versions and counts that depend on the server's own topics are left
out. Prints one line per command per target, then whether they agree; exits 1 on a difference.
"""

import json
import os
import sys

TOPIC = "CliTopic"
OUR_GROUPS = {"CliOnline", "CliOffline", "CliClone", "CliCfg"}


def lines(text):
    return [json.loads(l) for l in text.splitlines() if l.strip()]


def one(text):
    return json.loads(text.splitlines()[0])


def bodies(text):
    return sorted((m["body"], tuple(m["keys"]), m["tags"]) for m in lines(text))


def route(text):
    d = one(text)
    return {
        "brokers": sorted((b["cluster"], b["brokerName"], sorted(b["brokerAddrs"])) for b in d["brokerDatas"]),
        "queues": sorted((q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in d["queueDatas"]),
    }


# Which queue a message went to, and so which queues a consumer read first, differs from run to
# run: offsets compare as queue count, sum and lag.
def offsets(text):
    d = one(text)
    return {"diffTotal": d["diffTotal"], "queues": len(d["queues"]),
            "consumed": sum(q["consumerOffset"] for q in d["queues"])}


def queue_offsets(text):
    queues = one(text)["queues"]
    return {"queues": len(queues), "sum": sum(q["offset"] for q in queues)}


def group_config(text):
    cfg = one(text)["brokers"][0]["config"]
    keys = ["groupName", "consumeEnable", "consumeFromMinEnable", "consumeBroadcastEnable",
            "consumeMessageOrderly", "retryQueueNums", "retryMaxTimes", "brokerId",
            "whichBrokerWhenConsumeSlowly", "notifyConsumerIdsChangedEnable"]
    return {k: cfg.get(k) for k in keys}


def settings(key):
    return lambda text: sorted(v.get(key) for v in one(text).values())


def topic_list_c(text):
    for t in one(text)["topics"]:
        if t["topic"] == TOPIC:
            return {"clusters": t["clusters"], "groups": sorted(set(t["groups"]) & OUR_GROUPS)}
    return None


def consume_stats(text):
    return sorted((g["group"], g["queues"], g["diff"]) for g in one(text)["groups"]
                  if g["topic"] == TOPIC and g["group"] in OUR_GROUPS)


def stats_all(text):
    # Rates and day counts come from each broker's sampled statistics (Apache samples every few
    # seconds; Comet's serve has its counters off): only the groups and their backlog compare.
    return sorted((r["group"], r["accumulation"]) for r in one(text)["rows"] if r["group"] in OUR_GROUPS)


def connections(text):
    d = one(text)
    return {"clients": len(d["connectionSet"]),
            "topics": sorted(t for t in d["subscriptionTable"] if t == TOPIC),
            "model": d.get("messageModel"), "type": d.get("consumeType")}


# name -> reducer of a successful answer; a failed command reduces to "error".
REDUCERS = {
    "topic_list": lambda t: TOPIC in one(t)["topicList"],
    "topic_list_c": topic_list_c,
    "topic_route": route,
    "topic_status": lambda t: sorted((q["queueId"], q["minOffset"], q["maxOffset"]) for q in one(t)["queues"]),
    "topic_cluster_list": lambda t: one(t)["clusters"],
    "group_progress": offsets,
    "group_progress_push": offsets,
    "group_connections": connections,
    "group_status": lambda t: len(one(t)["clients"]),
    "group_config": group_config,
    "group_consume_stats": consume_stats,
    "producer_connections": lambda t: len(one(t)["connectionSet"]),
    "msg_by_key": bodies,
    "msg_by_id": bodies,
    "msg_by_unique_key": bodies,
    "msg_by_offset": bodies,
    "msg_print": bodies,
    "msg_consume_directly": lambda t: one(t)["consumeResult"],
    "cluster_list": lambda t: sorted((b["cluster"], b["brokerName"], b["brokerId"],
                                      "brokerVersionDesc" in b.get("runtime", {})) for b in one(t)["brokers"]),
    "broker_status": lambda t: sorted(k for k in ["bootTimestamp", "brokerVersionDesc", "commitLogMaxOffset",
                                                  "commitLogMinOffset", "runtime"]
                                      if k in next(iter(one(t).values()))),
    "stats_all": stats_all,
    "topic_update_perm": lambda t: one(t)["perm"],
    "topic_route_after_perm": route,
    "topic_update_perm_back": lambda t: one(t)["perm"],
    "topic_delete": lambda t: one(t)["deleted"],
    "topic_list_after_delete": lambda t: "CliTempTopic" in one(t)["topicList"],
    "group_create": lambda t: one(t)["group"],
    "group_config_after_create": group_config,
    "group_delete": lambda t: one(t)["topicsDeleted"],
    "group_config_after_delete": lambda t: "still there",
    "group_clone_offset": queue_offsets,
    "group_progress_clone": offsets,
    # `offline` (whether the client's CONSUMER_NOT_ONLINE fallback set the offsets) is left out:
    # run.sh has Apache's broker refuse offline groups, while Comet's resets them itself.
    "group_reset_offset": queue_offsets,
    "group_progress_after_reset": offsets,
    "group_skip_backlog": queue_offsets,
    "group_progress_after_skip": offsets,
    "broker_config_get": settings("brokerPermission"),
    "broker_config_set": lambda t: one(t)["settings"],
    "broker_config_after_set": settings("brokerPermission"),
    "broker_config_set_back": lambda t: one(t)["settings"],
    "namesrv_config_set": lambda t: one(t)["settings"],
    "namesrv_config_after_set": settings("orderMessageEnable"),
    # How many topics a wipe touches counts the server's own system topics: only the fact.
    "broker_perm_wipe": lambda t: (one(t)["action"], one(t)["brokerName"]),
    "topic_route_after_wipe": route,
    "broker_perm_add": lambda t: (one(t)["action"], one(t)["brokerName"]),
    "topic_route_after_add": route,
    "msg_send": lambda t: (one(t)["sendStatus"], one(t)["queueId"], one(t)["queueOffset"]),
    "msg_send_found": bodies,
    "msg_trace": lambda t: sorted({(r["type"], r["topic"], r["keys"]) for r in lines(t)}),
}


def answer(directory, name):
    with open(os.path.join(directory, name + ".rc")) as f:
        rc = int(f.read().strip() or "1")
    if rc != 0:
        return "error"
    with open(os.path.join(directory, name + ".json")) as f:
        text = f.read()
    try:
        return REDUCERS[name](text)
    except (KeyError, IndexError, StopIteration, ValueError, TypeError) as e:
        return f"unreadable answer ({type(e).__name__}: {e})"


def main():
    root, targets = sys.argv[1], sys.argv[2:]
    differ = []
    for name in REDUCERS:
        seen = {}
        for target in targets:
            seen[target] = answer(os.path.join(root, target), name)
            print(f"cli: {name:28} {target:7} {json.dumps(seen[target], sort_keys=True)}")
        if len({json.dumps(v, sort_keys=True) for v in seen.values()}) > 1:
            differ.append(name)
    if differ:
        print(f"cli: {len(differ)} command(s) answer differently: {' '.join(differ)}")
        return 1
    print(f"cli: all {len(REDUCERS)} commands answer alike on {', '.join(targets)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
