#!/usr/bin/env python3
"""Print the etcd revision of Cairn's model: the highest mod_revision of the keys that hold
objects (protection domains, fault sets, SDSs, devices, pools, volumes, hosts, users, their
name index, the system). Sessions, events, statistics and liveness keys move on their own
(a login writes a session; SDSs publish statistics every 2 s) and are left out, so the
number moves exactly when an object is created, changed or deleted.

Reads etcd's JSON gateway (POST /v3/kv/range) on an MDM client URL: no etcdctl needed.
Usage: model_revision.py http://127.0.0.1:PORT
"""

from __future__ import annotations

import base64
import json
import sys
import urllib.request

PREFIX = "/cairn/v1/"
MODEL = ["pd/", "faultset/", "sds/", "device/", "pool/", "volume/", "host/", "user/", "name/", "system"]


def prefix_end(p: bytes) -> bytes:
    return p[:-1] + bytes([p[-1] + 1])


def max_mod_revision(url: str, key: str) -> int:
    if not url.startswith(("http://", "https://")):
        raise SystemExit(f"model_revision: {url!r} is not an MDM client URL (http://host:port)")
    k = key.encode()
    body = {"key": base64.b64encode(k).decode(), "range_end": base64.b64encode(prefix_end(k)).decode(), "keys_only": True}
    req = urllib.request.Request(  # noqa: S310 (the scheme is checked above)
        url.rstrip("/") + "/v3/kv/range",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310
        doc = json.load(r)
    return max((int(kv.get("mod_revision", 0)) for kv in doc.get("kvs", [])), default=0)


def main() -> None:
    url = sys.argv[1]
    print(max(max_mod_revision(url, PREFIX + m) for m in MODEL))


if __name__ == "__main__":
    main()
