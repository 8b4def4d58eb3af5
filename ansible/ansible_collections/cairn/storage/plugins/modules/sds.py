#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)

from __future__ import annotations

DOCUMENTATION = r"""
module: sds
short_description: Register, tune or remove a Cairn data server (SDS)
version_added: "0.1.0"
description:
  - Registers an SDS (a running C(cairn sds) daemon) in a protection domain, optionally in a fault set,
    sets its rebuild bandwidth cap, or removes it.
  - Idempotent; supports check mode and diff.
options:
  name:
    description: Name of the SDS (the C(--name) its daemon runs with).
    type: str
    required: true
  protection_domain:
    description: Protection domain (name or id). Required to register the SDS.
    type: str
  fault_set:
    description: Fault set (name or id); without it the SDS is its own fault domain.
    type: str
  address:
    description: The SDS's data-path address, C(host:port) (port 7100 by default). Required to register it.
    type: str
  rebuild_mbps:
    description: Cap on the rebuild/rebalance traffic this SDS sends, MB/s (10^6 bytes/s); 0 removes the cap.
    type: int
  state:
    description:
      - V(present) registers it when missing and applies O(rebuild_mbps).
      - V(absent) removes it. With O(drain=true) its data first moves to the other SDSs (a job,
        waited for up to O(wait_timeout) seconds); without, the gateway refuses while it holds devices.
    type: str
    choices: [present, absent]
    default: present
  drain:
    description: With O(state=absent), move the SDS's data away first, then delete it.
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait for a drain to finish.
    type: int
    default: 3600
extends_documentation_fragment:
  - cairn.storage.cairn
author:
  - Cairn developers (@cairn-storage)
"""

EXAMPLES = r"""
- name: Register the SDS of every storage host
  cairn.storage.sds:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    name: "{{ inventory_hostname_short }}"
    protection_domain: pd1
    fault_set: rack1
    address: "{{ ansible_default_ipv4.address }}:7100"
  delegate_to: localhost

- name: Slow its rebuilds down to 50 MB/s
  cairn.storage.sds:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    name: sds2
    rebuild_mbps: 50
  delegate_to: localhost
"""

RETURN = r"""
sds:
  description: The SDS as the gateway shows it (empty after a removal).
  returned: always
  type: dict
  sample: {"id": "1044deacba2ad063", "name": "sds1", "protection_domain_name": "pd1", "address": "10.0.0.5:7100",
           "state": "normal", "up": true, "rebuild_mbps": 0, "device_count": 2}
job:
  description: The drain job (O(state=absent), O(drain=true)) as it ended.
  returned: when a drain ran
  type: dict
"""

from ansible_collections.cairn.storage.plugins.module_utils.cairn import CairnModule, compare_view, differences

KEYS = ["name", "protection_domain_name", "fault_set_name", "address", "rebuild_mbps"]


def main() -> None:
    m = CairnModule(
        dict(
            name=dict(type="str", required=True),
            protection_domain=dict(type="str"),
            fault_set=dict(type="str"),
            address=dict(type="str"),
            rebuild_mbps=dict(type="int"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            drain=dict(type="bool", default=False),
            wait_timeout=dict(type="int", default=3600),
        )
    )
    p = m.params
    api = m.client.sds
    name = p["name"]
    cur = m.find(api, name, "SDS")
    if p["state"] == "absent":
        result = {}
        if cur is not None:
            if p["drain"]:
                job = m.write(None, m.client.transport.request, "POST", f"/sds/{name}/remove", doing=f"remove SDS {name}")
                if job is not None and not m.check_mode:
                    body = getattr(job, "body", None) or {}
                    if body.get("id") and "state" in body:
                        done = m.call(f"wait for the drain of SDS {name}", m.client.jobs.wait, body["id"], timeout=float(p["wait_timeout"]))
                        result["job"] = dict(done.raw)
            else:
                m.write(None, api.delete, name, doing=f"delete SDS {name}")
        m.set_diff(compare_view(cur, KEYS), {})
        m.exit(sds={}, **result)
    if p["rebuild_mbps"] is not None and p["rebuild_mbps"] < 0:
        m.module.fail_json(msg=f"rebuild_mbps {p['rebuild_mbps']}: give 0 (no cap) or a positive number of MB/s")
    after = cur
    if cur is None:
        missing = [k for k in ("protection_domain", "address") if not p[k]]
        if missing:
            m.module.fail_json(msg=f"SDS {name} is not registered: give {' and '.join(missing)} to register it")
        would = {
            "name": name,
            "protection_domain_name": p["protection_domain"],
            "fault_set_name": p["fault_set"],
            "address": p["address"],
            "rebuild_mbps": 0,
        }
        after = m.write(
            would,
            api.create,
            name,
            protection_domain=p["protection_domain"],
            fault_set=p["fault_set"],
            address=p["address"],
            doing=f"register SDS {name}",
        )
    else:
        for k, field in (("protection_domain", "protection_domain_name"), ("fault_set", "fault_set_name"), ("address", "address")):
            if p[k] and p[k] not in (cur.get(field), cur.get(field.replace("_name", "_id"))):
                m.module.fail_json(
                    msg=f"SDS {name} has {k} {cur.get(field)!r}, not {p[k]!r}: that cannot change on a "
                    f"registered SDS; remove it (state=absent, drain=true) and register it again"
                )
    change = differences(after or {}, {"rebuild_mbps": p["rebuild_mbps"]})
    if change and after is not None:
        after = m.write(dict(after, **change), api.update, name, doing=f"update SDS {name}", **change)
    m.set_diff(compare_view(cur, KEYS), compare_view(after, KEYS))
    m.exit(sds=after or {})


if __name__ == "__main__":
    main()
