#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)

from __future__ import annotations

DOCUMENTATION = r"""
module: device
short_description: Add or remove a device of a Cairn SDS
version_added: "0.1.0"
description:
  - Adds a block device (by stable path) of an SDS to a storage pool. The gateway asks the SDS to
    check and prepare it (free, no other cluster's data, no filesystem) before recording it.
  - Removes it, optionally draining its data to the other devices first.
  - Idempotent; supports check mode and diff.
options:
  name:
    description: Name of the device.
    type: str
    required: true
  sds:
    description: The SDS (name or id) holding the device. Required to add it.
    type: str
  pool:
    description: Storage pool (name or id) the device serves. Required to add it.
    type: str
  path:
    description:
      - Stable path on the SDS, C(/dev/disk/by-id/...) or C(/dev/disk/by-path/...) (or a file, for tests).
        Required to add it.
    type: str
  force:
    description: Accept a kernel name like C(/dev/sdb) (it can change across reboots).
    type: bool
    default: false
  state:
    description:
      - V(present) adds it when missing; V(absent) removes it (with O(drain=true) its data first
        moves to other devices; without, the gateway refuses while its pool holds volumes).
    type: str
    choices: [present, absent]
    default: present
  drain:
    description: With O(state=absent), move the device's data away first.
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait for a drain to finish, or for the SDS to prepare an added device (the gateway's C(device-add) job).
    type: int
    default: 3600
extends_documentation_fragment:
  - cairn.storage.cairn
author:
  - Cairn developers (@cairn-storage)
"""

EXAMPLES = r"""
- name: Add an NVMe drive of sds1 to pool1
  cairn.storage.device:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    name: sds1-nvme0
    sds: sds1
    pool: pool1
    path: /dev/disk/by-id/nvme-Samsung_SSD_980_PRO_1TB_S5GXNX0R123456
  delegate_to: localhost
"""

RETURN = r"""
device:
  description: The device as the gateway shows it (empty after a removal).
  returned: always
  type: dict
  sample: {"id": "7a1e2c33d4f50a61", "name": "sds1-nvme0", "sds_name": "sds1", "pool_name": "pool1",
           "path": "/dev/disk/by-id/nvme-...", "capacity": 1000204886016, "state": "normal"}
"""

from ansible_collections.cairn.storage.plugins.module_utils.cairn import CairnModule, compare_view

KEYS = ["name", "sds_name", "pool_name", "path", "state"]


def main() -> None:
    m = CairnModule(
        dict(
            name=dict(type="str", required=True),
            sds=dict(type="str"),
            pool=dict(type="str"),
            path=dict(type="str"),
            force=dict(type="bool", default=False),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            drain=dict(type="bool", default=False),
            wait_timeout=dict(type="int", default=3600),
        )
    )
    p = m.params
    api = m.client.devices
    name = p["name"]
    cur = m.find(api, name, "device")
    if p["state"] == "absent":
        if cur is not None:
            if p["drain"]:
                r = m.write(None, m.client.transport.request, "POST", f"/devices/{name}/remove", doing=f"remove device {name}")
                body = getattr(r, "body", None) or {}
                if not m.check_mode and body.get("id") and "state" in body:
                    m.call(f"wait for the drain of device {name}", m.client.jobs.wait, body["id"], timeout=float(p["wait_timeout"]))
            else:
                m.write(None, api.delete, name, doing=f"delete device {name}")
        m.set_diff(compare_view(cur, KEYS), {})
        m.exit(device={})
    after = cur
    if cur is None:
        missing = [k for k in ("sds", "pool", "path") if not p[k]]
        if missing:
            m.module.fail_json(msg=f"device {name} does not exist: give {', '.join(missing)} to add it")
        would = {"name": name, "sds_name": p["sds"], "pool_name": p["pool"], "path": p["path"], "state": "normal"}
        after = m.write(
            would,
            api.create,
            name,
            sds=p["sds"],
            pool=p["pool"],
            path=p["path"],
            force=True if p["force"] else None,
            timeout=float(p["wait_timeout"]),
            doing=f"add device {name}",
        )
    else:
        for k, field in (("sds", "sds_name"), ("pool", "pool_name"), ("path", "path")):
            if p[k] and p[k] not in (cur.get(field), cur.get(field.replace("_name", "_id"))):
                m.module.fail_json(
                    msg=f"device {name} has {k} {cur.get(field)!r}, not {p[k]!r}: remove the device "
                    f"(state=absent) and add it again to change that"
                )
    m.set_diff(compare_view(cur, KEYS), compare_view(after, KEYS))
    m.exit(device=after or {})


if __name__ == "__main__":
    main()
