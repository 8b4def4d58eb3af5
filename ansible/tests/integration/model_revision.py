#!/usr/bin/env python3
"""Print the etcd revision of Cairn's model: the highest mod_revision of the keys that hold
objects (protection domains, fault sets, SDSs, devices, pools, volumes, hosts, users, their
name index, the system). Sessions, events, statistics and liveness keys move on their own
(a login writes a session; SDSs publish statistics every 2 s) and are left out, so the
number moves exactly when an object is created, changed or deleted.

Reads etcd with etcdctl (Debian's etcd-client) over an MDM client URL.
Usage: model_revision.py https://127.0.0.1:PORT PKI_DIR
PKI_DIR is a certificate of the cluster (cairn pki issue --role client): ca.crt, node.crt,
node.key. etcd authenticates every client by its certificate's common name (role client may
read the model); etcd's JSON gateway ignores client certificates, hence etcdctl.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PREFIX = "/cairn/v1/"
MODEL = ["pd/", "faultset/", "sds/", "device/", "pool/", "volume/", "host/", "user/", "name/", "system"]


def max_mod_revision(url: str, key: str, pki: Path) -> int:
    if not url.startswith("https://"):
        raise SystemExit(f"model_revision: {url!r} is not an MDM client URL (https://host:port)")
    out = subprocess.run(
        [
            "etcdctl",
            "--endpoints",
            url,
            "--cacert",
            str(pki / "ca.crt"),
            "--cert",
            str(pki / "node.crt"),
            "--key",
            str(pki / "node.key"),
            "--command-timeout",
            "10s",
            "get",
            "--prefix",
            "--keys-only",
            "-w",
            "json",
            key,
        ],
        check=True,
        capture_output=True,
        text=True,
        env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"},
    ).stdout
    doc = json.loads(out)
    return max((int(kv.get("mod_revision", 0)) for kv in doc.get("kvs", [])), default=0)


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit("usage: model_revision.py https://HOST:PORT PKI_DIR")
    url, pki = sys.argv[1], Path(sys.argv[2])
    print(max(max_mod_revision(url, PREFIX + m, pki) for m in MODEL))


if __name__ == "__main__":
    main()
