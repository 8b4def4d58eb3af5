#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)

from __future__ import annotations

DOCUMENTATION = r"""
module: storage_pool
short_description: Create, tune or delete a Cairn storage pool
version_added: "0.1.0"
description:
  - A storage pool is a set of devices in one protection domain that volumes are carved from.
  - Sets its spare capacity, rebuild/rebalance policy and per-GiB QoS.
  - Idempotent; supports check mode and diff.
options:
  name:
    description: Name of the pool.
    type: str
    required: true
  new_name:
    description: Rename the pool to this name.
    type: str
  protection_domain:
    description: Protection domain (name or id). Required to create the pool.
    type: str
  spare_percent:
    description: Share of the raw capacity kept free for rebuilds (at least the largest fault set's share).
    type: int
  pg_count:
    description: Placement groups of the pool; set at creation only.
    type: int
  rebuild_policy:
    description:
      - How rebuild, resync and rebalance copies are paced on every SDS.
      - V(unlimited) up to 16 pushes in flight per SDS; V(limit-concurrent-io) at most O(rebuild_max_io);
        V(favor-app-io) one at a time while the SDS serves application I/O.
    type: str
    choices: [unlimited, limit-concurrent-io, favor-app-io]
  rebuild_max_io:
    description: Pushes in flight per SDS with O(rebuild_policy=limit-concurrent-io) (1-64).
    type: int
  qos_iops_per_gib:
    description: IOPS limit per GiB of volume size for volumes without their own limit; 0 is off.
    type: int
  qos_bandwidth_per_gib:
    description: Bandwidth limit (bytes/s) per GiB of volume size for volumes without their own limit; 0 is off.
    type: int
  state:
    description: V(present) creates or updates it; V(absent) deletes it (refused while it holds volumes or devices).
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - cairn.storage.cairn
author:
  - Cairn developers (@cairn-storage)
"""

EXAMPLES = r"""
- name: A pool that keeps 20 % spare and rebuilds gently
  cairn.storage.storage_pool:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    name: pool1
    protection_domain: pd1
    spare_percent: 20
    rebuild_policy: limit-concurrent-io
    rebuild_max_io: 4
  delegate_to: localhost
"""

RETURN = r"""
storage_pool:
  description: The pool as the gateway shows it (empty after a delete).
  returned: always
  type: dict
  sample: {"id": "38a279c07e805666", "name": "pool1", "protection_domain_name": "pd1", "spare_percent": 20,
           "rebuild_policy": "limit-concurrent-io", "rebuild_max_io": 4, "redundant": true,
           "capacity": {"raw": 322122547200, "usable": 128849018880, "free": 128848994304}}
"""

from ansible_collections.cairn.storage.plugins.module_utils.cairn import CairnModule, compare_view, differences

KEYS = [
    "name",
    "protection_domain_name",
    "spare_percent",
    "pg_count",
    "rebuild_policy",
    "rebuild_max_io",
    "qos_iops_per_gib",
    "qos_bandwidth_per_gib",
]
TUNABLE = ["spare_percent", "rebuild_policy", "rebuild_max_io", "qos_iops_per_gib", "qos_bandwidth_per_gib"]


def main() -> None:
    m = CairnModule(
        dict(
            name=dict(type="str", required=True),
            new_name=dict(type="str"),
            protection_domain=dict(type="str"),
            spare_percent=dict(type="int"),
            pg_count=dict(type="int"),
            rebuild_policy=dict(type="str", choices=["unlimited", "limit-concurrent-io", "favor-app-io"]),
            rebuild_max_io=dict(type="int"),
            qos_iops_per_gib=dict(type="int"),
            qos_bandwidth_per_gib=dict(type="int"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        )
    )
    p = m.params
    api = m.client.pools
    name = p["name"]
    cur = m.find(api, name, "storage pool")
    if cur is None and p["new_name"] and p["state"] == "present":
        cur = m.find(api, p["new_name"], "storage pool")  # renamed by an earlier run
        if cur is not None:
            name = p["new_name"]
    if p["state"] == "absent":
        if cur is not None:
            m.write(None, api.delete, name, doing=f"delete storage pool {name}")
        m.set_diff(compare_view(cur, KEYS), {})
        m.exit(storage_pool={})
    if p["spare_percent"] is not None and not 0 <= p["spare_percent"] < 100:
        m.module.fail_json(msg=f"spare_percent {p['spare_percent']}: give a percentage from 0 to 99")
    wanted = {k: p[k] for k in TUNABLE}
    after = cur
    if cur is None:
        if not p["protection_domain"]:
            m.module.fail_json(msg=f"storage pool {name} does not exist: give protection_domain to create it")
        create = {k: p[k] for k in ("spare_percent", "pg_count", "qos_iops_per_gib", "qos_bandwidth_per_gib")}
        would = dict({k: v for k, v in create.items() if v is not None}, name=name, protection_domain_name=p["protection_domain"])
        after = m.write(would, api.create, name, protection_domain=p["protection_domain"], doing=f"create storage pool {name}", **create)
    elif p["protection_domain"] and p["protection_domain"] not in (cur.get("protection_domain_name"), cur.get("protection_domain_id")):
        m.module.fail_json(
            msg=f"storage pool {name} is in protection domain {cur.get('protection_domain_name')}, not "
            f"{p['protection_domain']}: a pool cannot move to another protection domain"
        )
    elif p["pg_count"] is not None and p["pg_count"] != cur.get("pg_count"):
        m.module.fail_json(msg=f"storage pool {name} has {cur.get('pg_count')} placement groups: pg_count is set at creation only")
    change = differences(after or {}, wanted)
    if p["new_name"] and p["new_name"] != (after or {}).get("name"):
        change["name"] = p["new_name"]
    if change:
        after = m.write(dict(after or {}, **change), api.update, name, doing=f"update storage pool {name}", **change)
    m.set_diff(compare_view(cur, KEYS), compare_view(after, KEYS))
    m.exit(storage_pool=after or {})


if __name__ == "__main__":
    main()
