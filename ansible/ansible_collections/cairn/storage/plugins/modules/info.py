#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)

from __future__ import annotations

DOCUMENTATION = r"""
module: info
short_description: Gather facts about a Cairn cluster
version_added: "0.1.0"
description:
  - Reads the system (health, capacity, rebuild progress, MDM leader) and lists of objects, as the gateway shows them.
  - Only reads; never changes anything (check mode is the same as a normal run).
options:
  gather_subset:
    description:
      - What to gather. V(all) is every subset.
      - V(statistics) is the system's I/O statistics; V(alerts) the open alerts (every alert with O(filters)).
    type: list
    elements: str
    choices: [all, system, protection_domains, fault_sets, sds, devices, pools, volumes, hosts, users,
              mdm_members, statistics, alerts]
    default: [system]
  filters:
    description:
      - Keep only the objects of the list subsets whose field O(filters[].key) equals O(filters[].value)
        (compared as text). Several filters must all match. The system and statistics are not filtered.
    type: list
    elements: dict
    suboptions:
      key:
        description: A field of the objects, e.g. V(pool_name), V(state), V(name), V(up).
        type: str
        required: true
      value:
        description: The value it must have.
        type: str
        required: true
extends_documentation_fragment:
  - cairn.storage.cairn
author:
  - Cairn developers (@cairn-storage)
"""

EXAMPLES = r"""
- name: Health and capacity
  cairn.storage.info:
    gateways: ["10.0.0.11:8443"]
    username: monitor1
    password: "{{ cairn_monitor_password }}"
  delegate_to: localhost
  register: cairn

- name: Fail when the cluster is not healthy
  ansible.builtin.assert:
    that: cairn.system.health.status == "ok"
    fail_msg: "{{ cairn.system.health.messages | join('; ') }}"

- name: The volumes of pool1 and the SDSs that are down
  cairn.storage.info:
    gateways: ["10.0.0.11:8443"]
    username: monitor1
    password: "{{ cairn_monitor_password }}"
    gather_subset: [volumes, sds]
    filters:
      - key: pool_name
        value: pool1
  delegate_to: localhost
"""

RETURN = r"""
system:
  description: GET /system - identity, health, capacity, counts, rebuild progress, MDM leader.
  returned: when V(system) is gathered
  type: dict
  sample: {"bootstrapped": true, "system": {"name": "lab"}, "health": {"status": "ok", "messages": []}}
protection_domains:
  description: Protection domains.
  returned: when gathered
  type: list
  elements: dict
fault_sets:
  description: Fault sets.
  returned: when gathered
  type: list
  elements: dict
sds:
  description: SDSs (state, up, maintenance, capacity).
  returned: when gathered
  type: list
  elements: dict
devices:
  description: Devices (state, capacity, errors).
  returned: when gathered
  type: list
  elements: dict
pools:
  description: Storage pools (capacity, spare, rebuild policy, redundancy).
  returned: when gathered
  type: list
  elements: dict
volumes:
  description: Volumes (size, pool, mappings, QoS limits).
  returned: when gathered
  type: list
  elements: dict
hosts:
  description: Hosts (type, IQN, mapped volumes; never CHAP secrets).
  returned: when gathered
  type: list
  elements: dict
users:
  description: API users (name, role; needs an admin).
  returned: when gathered
  type: list
  elements: dict
mdm_members:
  description: MDM (etcd) members, tie-breakers and leader.
  returned: when gathered
  type: list
  elements: dict
statistics:
  description: The system's I/O statistics (IOPS, bandwidth, latency; recent history).
  returned: when gathered
  type: dict
alerts:
  description: Alerts (open ones unless filters are given).
  returned: when gathered
  type: list
  elements: dict
"""

from typing import Any

from ansible_collections.cairn.storage.plugins.module_utils.cairn import CairnModule

LISTS = {
    "protection_domains": "protection_domains",
    "fault_sets": "fault_sets",
    "sds": "sds",
    "devices": "devices",
    "pools": "pools",
    "volumes": "volumes",
    "hosts": "hosts",
    "users": "users",
    "mdm_members": "mdm",
}
ALL = ["system", *LISTS, "statistics", "alerts"]


def keep(obj: dict[str, Any], filters: list[dict[str, str]]) -> bool:
    def text(v: object) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)

    return all(f["key"] in obj and text(obj[f["key"]]) == f["value"] for f in filters)


def main() -> None:
    m = CairnModule(
        dict(
            gather_subset=dict(type="list", elements="str", default=["system"], choices=["all", *ALL]),
            filters=dict(
                type="list",
                elements="dict",
                options=dict(
                    key=dict(type="str", required=True, no_log=False),
                    value=dict(type="str", required=True),
                ),
            ),
        )
    )
    p = m.params
    subsets = ALL if "all" in p["gather_subset"] else list(dict.fromkeys(p["gather_subset"]))
    filters = p["filters"] or []
    out: dict[str, Any] = {}
    for s in subsets:
        if s == "system":
            out["system"] = dict(m.call("read the system", m.client.system.get).raw)
        elif s == "statistics":
            out["statistics"] = dict(m.call("read the statistics", m.client.statistics.get).raw)
        elif s == "alerts":
            params = {} if filters else {"active": "true"}
            alerts = m.call("list alerts", m.client.alerts.list, **params)
            out["alerts"] = [dict(a.raw) for a in alerts if keep(a.raw, filters)]
        else:
            objs = m.call(f"list {s.replace('_', ' ')}", getattr(m.client, LISTS[s]).list)
            out[s] = [dict(o.raw) for o in objs if keep(o.raw, filters)]
    m.exit(**out)


if __name__ == "__main__":
    main()
