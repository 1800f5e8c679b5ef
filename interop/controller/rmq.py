#!/usr/bin/env python3
"""Read-only probes of a RocketMQ name server and controller over the remoting protocol (JSON
headers), for interop/controller/run.sh. Each probe prints one line of JSON and exits 0, or exits 1
with the reason on stderr when the server did not answer or answered with an error.

  rmq.py master NAMESRV BROKER_NAME [TOPIC]
      {"master": "ip:port" | null, "brokers": {"id": "ip:port", ...}} from the topic's route
      (GET_ROUTEINFO_BY_TOPIC) or, without TOPIC, from the cluster info (GET_BROKER_CLUSTER_INFO)
  rmq.py syncstate CONTROLLERS BROKER_NAME
      CONTROLLERS is "ip:port;ip:port;..."; asks each for GET_SYNC_STATE_DATA until one (the
      leader) answers: {"controller": "ip:port", "masterAddress": ..., "masterBrokerId": ...,
      "masterEpoch": ..., "syncStateSetEpoch": ..., "inSync": ["ip:port", ...],
      "notInSync": [...], "alive": {"ip:port": true|false}}
  rmq.py metadata CONTROLLER
      GET_CONTROLLER_METADATA_INFO header: leader id and address, isLeader, peers
"""
import json
import re
import socket
import struct
import sys

GET_ROUTEINFO_BY_TOPIC = 105
GET_BROKER_CLUSTER_INFO = 106
CONTROLLER_GET_METADATA_INFO = 1005
CONTROLLER_GET_SYNC_STATE_DATA = 1006
SUCCESS = 0
VERSION = 500  # newer than 4.9.4, so the name server honours acceptStandardJsonOnly
TIMEOUT = 3.0


class RemotingError(Exception):
    pass


def call(addr, code, ext=None, body=b""):
    host, port = addr.rsplit(":", 1)
    header = json.dumps({
        "code": code, "flag": 0, "language": "JAVA", "opaque": 1, "serializeTypeCurrentRPC": "JSON",
        "version": VERSION, "extFields": ext or {},
    }).encode()
    frame = struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as s:
        s.settimeout(TIMEOUT)
        s.sendall(frame)
        length = struct.unpack(">i", recv_exact(s, 4))[0]
        data = recv_exact(s, length)
    hlen = struct.unpack(">i", data[:4])[0] & 0xFFFFFF
    if data[:4][0] != 0:
        raise RemotingError(f"{addr}: answered with a non-JSON header")
    resp = json.loads(data[4:4 + hlen])
    return resp, data[4 + hlen:]


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise RemotingError("connection closed")
        buf += chunk
    return buf


def loads_lenient(body):
    """fastjson writes maps with numeric keys unquoted ({0:"addr"}); quote them for Python."""
    text = body.decode("utf-8")
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(re.sub(r'([{,])\s*(-?\d+)\s*:', r'\1"\2":', text))


def master(namesrv, broker_name, topic=None):
    if topic:
        resp, body = call(namesrv, GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "acceptStandardJsonOnly": "true"})
        if resp.get("code") != SUCCESS:
            raise RemotingError(f"route of {topic}: code {resp.get('code')} {resp.get('remark')}")
        datas = loads_lenient(body).get("brokerDatas") or []
        brokers = next((d.get("brokerAddrs") or {} for d in datas if d.get("brokerName") == broker_name), {})
    else:
        resp, body = call(namesrv, GET_BROKER_CLUSTER_INFO)
        if resp.get("code") != SUCCESS:
            raise RemotingError(f"cluster info: code {resp.get('code')} {resp.get('remark')}")
        table = loads_lenient(body).get("brokerAddrTable") or {}
        brokers = (table.get(broker_name) or {}).get("brokerAddrs") or {}
    brokers = {str(k): v for k, v in brokers.items()}
    return {"master": brokers.get("0"), "brokers": brokers}


def syncstate(controllers, broker_name):
    errors = []
    for addr in [a for a in controllers.split(";") if a]:
        try:
            resp, body = call(addr, CONTROLLER_GET_SYNC_STATE_DATA, body=json.dumps([broker_name]).encode())
        except (OSError, RemotingError, ValueError) as e:
            errors.append(f"{addr}: {e}")
            continue
        if resp.get("code") != SUCCESS or not body:
            errors.append(f"{addr}: code {resp.get('code')} {resp.get('remark')}")
            continue
        info = (loads_lenient(body).get("replicasInfoTable") or {}).get(broker_name)
        if info is None:
            errors.append(f"{addr}: no replicas of {broker_name}")
            continue
        ins = info.get("inSyncReplicas") or []
        outs = info.get("notInSyncReplicas") or []
        return {
            "controller": addr,
            "masterAddress": info.get("masterAddress"),
            "masterBrokerId": info.get("masterBrokerId"),
            "masterEpoch": info.get("masterEpoch"),
            "syncStateSetEpoch": info.get("syncStateSetEpoch"),
            "inSync": [r.get("brokerAddress") for r in ins],
            "notInSync": [r.get("brokerAddress") for r in outs],
            "ids": {r.get("brokerAddress"): r.get("brokerId") for r in ins + outs},
            "alive": {r.get("brokerAddress"): r.get("alive") for r in ins + outs},
        }
    raise RemotingError("; ".join(errors) or "no controller given")


def metadata(controller):
    resp, _ = call(controller, CONTROLLER_GET_METADATA_INFO)
    if resp.get("code") != SUCCESS:
        raise RemotingError(f"code {resp.get('code')} {resp.get('remark')}")
    return resp.get("extFields") or {}


def main(argv):
    try:
        if len(argv) >= 3 and argv[0] == "master":
            out = master(*argv[1:4])
        elif len(argv) == 3 and argv[0] == "syncstate":
            out = syncstate(argv[1], argv[2])
        elif len(argv) == 2 and argv[0] == "metadata":
            out = metadata(argv[1])
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (OSError, RemotingError, ValueError) as e:
        print(f"rmq.py {argv[0]}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
