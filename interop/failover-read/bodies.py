#!/usr/bin/env python3
"""Runs `comet consume ... --json` (the command after --) and writes the body of every message it
prints (one JSON object per line) as one line of OUT, flushed at once, so that a script can watch
the file grow. Exits with the command's exit status.

With --hold-after N --release FILE it stops reading after N messages until FILE exists. The pipe
from the command is made as small as Linux allows (one page) before the command starts:
`comet consume` reports a message consumed only once it printed it, so when the pipe is full its
listener waits, and this reader stands for a slow listener. With --pull-threshold-for-queue 1
the consumer's backlog then stays on the broker while it waits.

    bodies.py OUT [--hold-after N --release FILE] [--pid-file FILE] -- comet consume ... --json
"""
import argparse
import fcntl
import json
import os
import subprocess
import sys
import time

# Linux's F_SETPIPE_SZ (fcntl.F_SETPIPE_SZ from Python 3.10 on).
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
POLL_SECONDS = 0.05


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--hold-after", type=int)
    parser.add_argument("--release")
    parser.add_argument("--pid-file", help="where to write the command's pid")
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        parser.error("no command after --")
    args = parser.parse_args(argv[: argv.index("--")])
    command = argv[argv.index("--") + 1 :]
    if (args.hold_after is None) != (args.release is None):
        parser.error("--hold-after and --release go together")
    read_end, write_end = os.pipe()
    if args.hold_after is not None:
        fcntl.fcntl(write_end, F_SETPIPE_SZ, os.sysconf("SC_PAGE_SIZE"))
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=write_end)
    os.close(write_end)
    if args.pid_file:
        with open(args.pid_file + ".tmp", "w") as f:
            f.write(f"{child.pid}\n")
        os.replace(args.pid_file + ".tmp", args.pid_file)
    count = 0
    with os.fdopen(read_end, "rb") as lines, open(args.out, "a", encoding="utf-8") as out:
        for line in lines:
            if args.hold_after is not None and count == args.hold_after:
                while not os.path.exists(args.release):
                    time.sleep(POLL_SECONDS)
            out.write(json.loads(line)["body"] + "\n")
            out.flush()
            count += 1
    sys.exit(child.wait())


if __name__ == "__main__":
    main()
