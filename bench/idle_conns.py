#!/usr/bin/env python3
"""Holds N idle RocketMQ client connections to a broker (compare.sh workload W6).

Each connection sends one HEART_BEAT (code 34, JSON header, an empty producer/consumer set) and
reads its response, so the broker has accepted and answered it as a real client connection; then
all of them stay idle. When every response is in, the count is written to READY_FILE. On SIGTERM
the script counts the connections the broker still holds open and writes it to READY_FILE.done.

    idle_conns.py HOST PORT N READY_FILE
"""
import json
import resource
import select
import signal
import socket
import struct
import sys

HEART_BEAT = 34
RESPONSE_TIMEOUT_S = 30


def frame(opaque, client_id):
    body = json.dumps({"clientID": client_id, "consumerDataSet": [], "producerDataSet": []}).encode()
    header = json.dumps({
        "code": HEART_BEAT, "extFields": {}, "flag": 0, "language": "JAVA", "opaque": opaque,
        "serializeTypeCurrentRPC": "JSON", "version": 399,
    }).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def read_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main():
    host, port, n, ready = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))
    socks = []
    for i in range(n):
        s = socket.create_connection((host, port))
        s.sendall(frame(i + 1, f"127.0.0.1@compare-idle-{i}"))
        socks.append(s)
    answered = 0
    for s in socks:
        s.settimeout(RESPONSE_TIMEOUT_S)
        head = read_exact(s, 4)
        if head is None:
            continue
        (length,) = struct.unpack(">i", head)
        if read_exact(s, length) is not None:
            answered += 1
    with open(ready, "w") as f:
        f.write(f"{answered}\n")

    def finish(*_):
        alive = 0
        for s in socks:
            readable, _, _ = select.select([s], [], [], 0)
            if not readable:
                alive += 1  # nothing to read, not even EOF: still open
                continue
            try:
                if s.recv(1, socket.MSG_PEEK):
                    alive += 1
            except OSError:
                pass
        with open(ready + ".done", "w") as f:
            f.write(f"{alive}\n")
        sys.exit(0)

    signal.signal(signal.SIGTERM, finish)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
