#!/usr/bin/env python3
"""The verdict of interop/controller/run.sh, from the files it wrote.

  check.py watch ACK_FILE FROM_BYTE FAULT_MS HOST NAMESRV BROKER_NAME TOPIC CONTROLLERS TIMEOUT_S
      after a fault of the master HOST at FAULT_MS: waits (polling every 50 ms) until a send is
      acknowledged with a timestamp >= FAULT_MS by a broker other than HOST; meanwhile two probe
      threads note when the controller leader first named another master and when the name
      server's route first showed another brokerId 0. Prints "first_ack=TS ack_host=HOST
      controller_ms=MS route_ms=MS new_master=HOST" (MS after FAULT_MS, -1 when not seen) and
      exits 0, or prints the same with first_ack=-1 and exits 1 after TIMEOUT_S
  check.py report ACK_FILE CONSUMED_FILE FAULTS_FILE
      FAULTS_FILE has one line per fault: "ROUND FAULT KILL_TS_MS HOST" (HOST = the master that was
      killed or stopped). Prints one line per fault (RTO = first acknowledged send stored by
      another broker minus the fault time), then the totals, and exits 1 when an acknowledged
      message was never delivered or a fault has no acknowledged send by another broker after it.

Lines of ACK_FILE: "ack SEQ TS HOST BROKER QUEUE QOFFSET OFFSET_MSG_ID MSG_ID", "nok SEQ TS STATUS
HOST", "fail SEQ TS WHAT". Lines of CONSUMED_FILE: "msg SEQ QUEUE QOFFSET HOST MSG_ID".
"""
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rmq  # noqa: E402


def read_acks(path, start=0):
    acks, others = [], []
    with open(path, "rb") as f:
        f.seek(start)
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # being written
            p = raw.decode().split()
            if not p:
                continue
            if p[0] == "ack" and len(p) >= 7:
                acks.append({"seq": int(p[1]), "ts": int(p[2]), "host": p[3], "queue": int(p[5]), "qoff": int(p[6])})
            elif p[0] in ("nok", "fail") and len(p) >= 4:
                others.append({"kind": p[0], "seq": int(p[1]), "ts": int(p[2]), "what": " ".join(p[3:])})
    return acks, others


def watch(argv):
    import threading

    path, start, fault_ms, host = argv[0], int(argv[1]), int(argv[2]), argv[3]
    namesrv, broker_name, topic, controllers, timeout = argv[4], argv[5], argv[6], argv[7], float(argv[8])
    deadline = time.time() + timeout
    seen = {}  # "controller" / "route" -> (ms after the fault, new master)
    done = threading.Event()

    def probe(key, ask):
        # each probe in its own thread, so a slow answer of one does not delay the other
        while not done.is_set():
            try:
                m = ask()
                if m and m != host:
                    seen[key] = (int(time.time() * 1000) - fault_ms, m)
                    return
            except (OSError, rmq.RemotingError, ValueError):
                pass
            time.sleep(0.05)

    threads = [
        threading.Thread(target=probe, daemon=True, args=(
            "controller", lambda: rmq.syncstate(controllers, broker_name).get("masterAddress"))),
        threading.Thread(target=probe, daemon=True, args=(
            "route", lambda: rmq.master(namesrv, broker_name, topic).get("master"))),
    ]
    for t in threads:
        t.start()
    first = None
    while True:
        acks, _ = read_acks(path, start)
        first = next((a for a in acks if a["ts"] >= fault_ms and a["host"] != host), None)
        if first is not None or time.time() > deadline:
            break
        time.sleep(0.05)
    # the probes get a moment more to see what the client already saw
    for t in threads:
        t.join(max(0.0, min(2.0, deadline - time.time())))
    done.set()
    controller_ms, new_master = seen.get("controller", (-1, "-"))
    route_ms, _ = seen.get("route", (-1, "-"))
    print(f"first_ack={first['ts'] if first else -1} ack_host={first['host'] if first else '-'} "
          f"controller_ms={controller_ms} route_ms={route_ms} new_master={new_master}")
    return 0 if first else 1


def report(argv):
    ack_path, consumed_path, faults_path = argv
    acks, others = read_acks(ack_path)
    delivered = collections.Counter()
    with open(consumed_path) as f:
        for line in f:
            p = line.split()
            if len(p) >= 2 and p[0] == "msg" and p[1].isdigit():
                delivered[int(p[1])] += 1
    faults = []
    with open(faults_path) as f:
        for line in f:
            p = line.split()
            if len(p) == 4:
                faults.append((int(p[0]), p[1], int(p[2]), p[3]))

    ok = True
    acks.sort(key=lambda a: a["ts"])
    for i, (rnd, fault, ts, host) in enumerate(faults):
        until = faults[i + 1][2] if i + 1 < len(faults) else float("inf")
        first = next((a for a in acks if a["ts"] >= ts and a["host"] != host), None)
        failed = sum(1 for o in others if ts <= o["ts"] <= (first["ts"] if first else until))
        if first is None:
            ok = False
            print(f"controller: FAILOVER {rnd} ({fault}) of master {host}: NO acknowledged send by another broker after it")
            continue
        stale = sum(1 for a in acks if first["ts"] <= a["ts"] < until and a["host"] == host)
        print(f"controller: FAILOVER {rnd} ({fault}) of master {host}: RTO {first['ts'] - ts} ms "
              f"(first SEND_OK on {first['host']}), {failed} send(s) failed or not ok in between, "
              f"{stale} SEND_OK from the old master after that")

    acked = {a["seq"] for a in acks}
    lost = sorted(acked - set(delivered))
    dup_seqs = [s for s, n in delivered.items() if n > 1]
    dup_extra = sum(delivered[s] - 1 for s in dup_seqs)
    unacked_delivered = sorted(set(delivered) - acked)
    slots = collections.defaultdict(set)
    for a in acks:
        slots[(a["queue"], a["qoff"])].add(a["seq"])
    conflicts = sum(1 for v in slots.values() if len(v) > 1)
    print(f"controller: TOTAL sends {len(acks) + len(others)}, acked {len(acked)}, "
          f"not acked {len(others)}, delivered {len(delivered)} distinct ({sum(delivered.values())} in all), "
          f"lost {len(lost)}, duplicated {dup_extra} ({len(dup_seqs)} seqs), "
          f"delivered but not acked {len(unacked_delivered)}, acked queue offsets given twice {conflicts}")
    if lost:
        ok = False
        print(f"controller: LOST seqs (first 20): {lost[:20]}")
    if dup_seqs:
        print(f"controller: duplicated seqs (first 20): {sorted(dup_seqs)[:20]}")
    return 0 if ok else 1


def main(argv):
    if len(argv) == 10 and argv[0] == "watch":
        return watch(argv[1:])
    if len(argv) == 4 and argv[0] == "report":
        return report(argv[1:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
