#!/usr/bin/env python3
"""The workspace's layering, checked on `cargo metadata`: data flows one way (socket → protocol →
remoting → broker / namesrv → store), so each crate may depend (outside tests) only on the crates
of ours listed for it below. Exits 1 and names every dependency outside its crate's list.

    scripts/check_layers.py
"""

import json
import subprocess
import sys

# Normal (non-dev) dependencies each crate may have on the workspace's own crates.
ALLOWED = {
    "comet-protocol": set(),
    "comet-grpc-proto": set(),
    "comet-config-file": {"comet-protocol"},
    "comet-remoting": {"comet-protocol"},
    "comet-store": {"comet-protocol", "comet-config-file"},
    "comet-namesrv": {"comet-protocol", "comet-remoting", "comet-config-file"},
    # The controller is a sibling of the name server: no broker, no store.
    "comet-controller": {"comet-protocol", "comet-remoting", "comet-config-file"},
    "comet-acl": {"comet-protocol", "comet-remoting"},
    "comet-broker": {
        "comet-protocol", "comet-remoting", "comet-config-file", "comet-store", "comet-acl",
    },
    "comet-grpc": {
        "comet-protocol", "comet-remoting", "comet-store", "comet-acl", "comet-broker",
        "comet-grpc-proto",
    },
    # The test harness starts whatever the tests need, up to the client and the console. It is a
    # dev-dependency only: no crate has it in its list, so a normal dependency on it fails here.
    "comet-testkit": {
        "comet-protocol", "comet-remoting", "comet-store", "comet-namesrv", "comet-broker",
        "comet-grpc", "comet-grpc-proto", "comet-client", "comet-console",
    },
    "comet-client": {"comet-protocol", "comet-remoting", "comet-acl"},
    "comet-reliability": {"comet-protocol", "comet-remoting", "comet-client"},
    "comet-console": {"comet-protocol", "comet-client"},
    "comet": {
        "comet-protocol", "comet-remoting", "comet-namesrv", "comet-broker", "comet-client",
        "comet-grpc", "comet-grpc-proto",
        "comet-console", "comet-controller", "comet-config-file",
    },
}


def main():
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        check=True, capture_output=True, text=True,
    ).stdout
    ours = {p["name"]: p for p in json.loads(out)["packages"]}
    bad = []
    for name, package in sorted(ours.items()):
        if name not in ALLOWED:
            bad.append(f"{name}: a workspace crate without a layering rule in {sys.argv[0]}")
            continue
        for dep in package["dependencies"]:
            if dep["name"] in ours and dep["kind"] is None and dep["name"] not in ALLOWED[name]:
                bad.append(f"{name} depends on {dep['name']}")
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
