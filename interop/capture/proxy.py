#!/usr/bin/env python3
"""Recording TCP proxy for RocketMQ remoting traffic (Python 3 standard library only).

Why: golden fixtures must be the bytes real Apache peers put on the wire, not what we believe they
send. The proxy sits between a real client and a real server, forwards every byte unchanged in both
directions, and on the side cuts the streams into remoting frames (4-byte big-endian length prefix)
and saves each frame, prefix included, as its own file plus one line of index in frames.jsonl.

    proxy.py --out DIR --map LABEL=LISTEN_HOST:PORT=TARGET_HOST:PORT [--map ...]

Several --map entries share one output directory and one sequence counter, so the files tell the
order in which the proxy saw frames across connections. Files are NNNN-<c2s|s2c>-<code>.bin.
Forwarding never depends on parsing: a frame the proxy cannot make sense of is still forwarded, and
the parse error is recorded in the index. Stops on SIGTERM/SIGINT after flushing the index.
"""

import argparse
import json
import os
import signal
import socket
import struct
import sys
import threading

# A frame larger than this is not saved (it is still forwarded); matches the protocol's 16 MiB cap.
MAX_FRAME_LEN = 16 * 1024 * 1024
RECV_CHUNK = 64 * 1024
LISTEN_BACKLOG = 64
# Fixed part of a ROCKETMQ binary header: code i16, language u8, version i16, opaque i32, flag i32,
# remark length i32, ext length i32 follows the remark.
BINARY_FIXED = 17
SERIALIZE_NAMES = {0: "JSON", 1: "ROCKETMQ"}


def decode_binary_header(h):
    """Decodes a ROCKETMQ header into the same field names the JSON header uses."""
    if len(h) < BINARY_FIXED + 4:
        raise ValueError("binary header shorter than its fixed part")
    code, lang, version, opaque, flag, remark_len = struct.unpack_from(">hBhiii", h, 0)
    pos = BINARY_FIXED
    if remark_len < 0 or pos + remark_len + 4 > len(h):
        raise ValueError("remark length out of range")
    remark = h[pos:pos + remark_len].decode("utf-8") if remark_len else None
    pos += remark_len
    (ext_len,) = struct.unpack_from(">i", h, pos)
    pos += 4
    if ext_len < 0 or pos + ext_len > len(h):
        raise ValueError("ext fields length out of range")
    end = pos + ext_len
    ext = []
    while pos < end:
        if pos + 2 > end:
            raise ValueError("truncated ext key length")
        (klen,) = struct.unpack_from(">h", h, pos)
        pos += 2
        if klen < 0 or pos + klen + 4 > end:
            raise ValueError("ext key out of range")
        key = h[pos:pos + klen].decode("utf-8")
        pos += klen
        (vlen,) = struct.unpack_from(">i", h, pos)
        pos += 4
        if vlen < 0 or pos + vlen > end:
            raise ValueError("ext value out of range")
        ext.append([key, h[pos:pos + vlen].decode("utf-8")])
        pos += vlen
    header = {"code": code, "language": lang, "version": version, "opaque": opaque, "flag": flag}
    if remark is not None:
        header["remark"] = remark
    if ext_len:
        # A list of pairs: the binary codec may repeat a key, and the order is worth keeping.
        header["extFields"] = ext
    return header


class Recorder:
    """Owns the output directory, the global sequence counter and the index file."""

    def __init__(self, out_dir):
        self.out_dir = out_dir
        os.makedirs(out_dir, exist_ok=True)
        self.lock = threading.Lock()
        self.seq = 0
        self.conn_seq = 0
        self.index = open(os.path.join(out_dir, "frames.jsonl"), "a", encoding="utf-8")

    def next_conn(self):
        with self.lock:
            self.conn_seq += 1
            return self.conn_seq

    def record(self, label, conn, direction, frame):
        entry = {"label": label, "conn": conn, "direction": direction, "frame_len": len(frame)}
        name_code = "x"
        try:
            (mark,) = struct.unpack_from(">I", frame, 4)
            ser = mark >> 24
            header_len = mark & 0xFFFFFF
            header = frame[8:8 + header_len]
            if len(header) != header_len:
                raise ValueError("header length past end of frame")
            entry.update(serialize_type=SERIALIZE_NAMES.get(ser, ser), header_len=header_len,
                         body_len=len(frame) - 8 - header_len)
            if ser == 0:
                decoded = json.loads(header.decode("utf-8"))
            elif ser == 1:
                decoded = decode_binary_header(header)
            else:
                raise ValueError("unknown serialize type %d" % ser)
            for key in ("code", "flag", "opaque", "language", "version"):
                entry[key] = decoded.get(key)
            entry["header"] = decoded
            name_code = str(decoded.get("code"))
        except (ValueError, struct.error, UnicodeDecodeError) as e:
            entry["error"] = str(e)
        with self.lock:
            self.seq += 1
            entry["seq"] = self.seq
            name = "%04d-%s-%s.bin" % (self.seq, direction, name_code)
            entry["file"] = name
            with open(os.path.join(self.out_dir, name), "wb") as f:
                f.write(frame)
            self.index.write(json.dumps(entry, ensure_ascii=False) + "\n")
            self.index.flush()

    def close(self):
        with self.lock:
            self.index.close()


def pump(src, dst, recorder, label, conn, direction):
    """Forwards src -> dst, cutting a copy of the stream into frames for the recorder."""
    buf = bytearray()
    broken = False  # after a nonsensical length prefix, stop parsing but keep forwarding
    try:
        while True:
            chunk = src.recv(RECV_CHUNK)
            if not chunk:
                break
            dst.sendall(chunk)
            if broken:
                continue
            buf += chunk
            while len(buf) >= 4:
                (length,) = struct.unpack_from(">I", buf, 0)
                if length < 4 or length > MAX_FRAME_LEN:
                    recorder.record(label, conn, direction, bytes(buf[:4]))
                    broken = True
                    buf.clear()
                    break
                if len(buf) < 4 + length:
                    break
                recorder.record(label, conn, direction, bytes(buf[:4 + length]))
                del buf[:4 + length]
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass


def serve(label, listen, target, recorder, ready):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(listen)
        server.listen(LISTEN_BACKLOG)
    except OSError as e:
        print("proxy %s: cannot listen on %s:%d: %s" % (label, listen[0], listen[1], e), file=sys.stderr)
        os._exit(2)
    ready.release()
    while True:
        client, _ = server.accept()
        try:
            upstream = socket.create_connection(target)
        except OSError as e:
            print("proxy %s: cannot reach %s:%d: %s" % (label, target[0], target[1], e), file=sys.stderr)
            client.close()
            continue
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = recorder.next_conn()
        threads = [
            threading.Thread(target=pump, args=(client, upstream, recorder, label, conn, "c2s"), daemon=True),
            threading.Thread(target=pump, args=(upstream, client, recorder, label, conn, "s2c"), daemon=True),
        ]
        for t in threads:
            t.start()
        threading.Thread(target=closer, args=(threads, client, upstream), daemon=True).start()


def closer(threads, *sockets):
    for t in threads:
        t.join()
    for s in sockets:
        s.close()


def parse_addr(text):
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError("expected HOST:PORT, got %r" % text)
    return host, int(port)


def parse_map(text):
    parts = text.split("=")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError("expected LABEL=LISTEN_HOST:PORT=TARGET_HOST:PORT, got %r" % text)
    return parts[0], parse_addr(parts[1]), parse_addr(parts[2])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for frame files and frames.jsonl")
    ap.add_argument("--map", required=True, action="append", type=parse_map,
                    help="LABEL=LISTEN_HOST:PORT=TARGET_HOST:PORT (repeatable)")
    args = ap.parse_args()

    recorder = Recorder(args.out)
    stop = threading.Event()

    def on_signal(signum, _frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    ready = threading.Semaphore(0)
    for label, listen, target in args.map:
        threading.Thread(target=serve, args=(label, listen, target, recorder, ready), daemon=True).start()
    for _ in args.map:
        ready.acquire()
    print("proxy ready: " + ", ".join("%s %s:%d -> %s:%d" % (l, *a, *t) for l, a, t in args.map), flush=True)
    stop.wait()
    recorder.close()


if __name__ == "__main__":
    main()
