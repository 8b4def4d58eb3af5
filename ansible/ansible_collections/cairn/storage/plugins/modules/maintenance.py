#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)

from __future__ import annotations

DOCUMENTATION = r"""
module: maintenance
short_description: Put a Cairn SDS or fault set into maintenance, or take it out
version_added: "0.1.0"
description:
  - V(instant) maintenance takes the SDS's copies away at once; its partners record which chunks
    change and only those are resynced on exit. V(protected) first builds extra copies, so no data
    has a single copy while the SDS (or the whole fault set) is away.
  - With O(wait=true) the module returns when it is safe to shut the SDS down (enter), or when its
    data is resynced and no placement group is degraded (exit), or fails after O(wait_timeout) seconds
    (the request stays in effect).
  - Idempotent; supports check mode and diff.
options:
  sds:
    description: The SDS (name or id). Exactly one of O(sds) and O(fault_set).
    type: str
  fault_set:
    description: The fault set (name or id), every SDS in it at once.
    type: str
  state:
    description: V(present) is in maintenance; V(absent) is out of maintenance.
    type: str
    choices: [present, absent]
    default: present
  mode:
    description: V(instant) or V(protected). With O(state=present) an SDS already in the other mode fails (exit first).
    type: str
    choices: [instant, protected]
    default: instant
  wait:
    description: Wait until it is safe to shut the SDS down (enter) or until the resync is done (exit).
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait.
    type: int
    default: 1800
  poll_interval:
    description: Seconds between two looks at the cluster while waiting.
    type: int
    default: 2
extends_documentation_fragment:
  - cairn.storage.cairn
author:
  - Cairn developers (@cairn-storage)
"""

EXAMPLES = r"""
- name: Patch one host at a time
  hosts: storage
  serial: 1
  tasks:
    - name: Protected maintenance for this host's SDS
      cairn.storage.maintenance:
        gateways: ["10.0.0.11:8443"]
        username: operator1
        password: "{{ cairn_operator_password }}"
        sds: "{{ inventory_hostname_short }}"
        mode: protected
        wait_timeout: 3600
      delegate_to: localhost
    - name: Patch and reboot
      ansible.builtin.reboot:
    - name: Out of maintenance, wait for the resync
      cairn.storage.maintenance:
        gateways: ["10.0.0.11:8443"]
        username: operator1
        password: "{{ cairn_operator_password }}"
        sds: "{{ inventory_hostname_short }}"
        state: absent
      delegate_to: localhost

- name: A whole rack at once
  cairn.storage.maintenance:
    gateways: ["10.0.0.11:8443"]
    username: operator1
    password: "{{ cairn_operator_password }}"
    fault_set: rack2
    mode: instant
  delegate_to: localhost
"""

RETURN = r"""
sds:
  description: The SDSs concerned, as the gateway shows them at the end (state, up, maintenance mode and state).
  returned: always
  type: list
  elements: dict
  sample: [{"name": "sds2", "state": "maintenance", "up": true, "maintenance": {"mode": "instant", "state": "in-maintenance"}}]
waited_seconds:
  description: How long the module waited.
  returned: always
  type: float
"""

import time

from typing import Any

from ansible_collections.cairn.storage.plugins.module_utils.cairn import CairnModule


def mstate(s: dict[str, Any]) -> dict[str, Any]:
    mt = s.get("maintenance") or {}
    return {"mode": mt.get("mode") or "", "state": mt.get("state") or ""}


def view(sdss: list[dict[str, Any]]) -> dict[str, Any]:
    return {str(s.get("name")): mstate(s) for s in sdss}


def main() -> None:
    m = CairnModule(
        dict(
            sds=dict(type="str"),
            fault_set=dict(type="str"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            mode=dict(type="str", choices=["instant", "protected"], default="instant"),
            wait=dict(type="bool", default=True),
            wait_timeout=dict(type="int", default=1800),
            poll_interval=dict(type="int", default=2),
        ),
        mutually_exclusive=[("sds", "fault_set")],
        required_one_of=[("sds", "fault_set")],
    )
    p = m.params
    enter = p["state"] == "present"
    members: list[dict[str, Any]]
    if p["sds"]:
        one = m.find(m.client.sds, p["sds"], "SDS")
        if one is None:
            m.module.fail_json(msg=f"no SDS {p['sds']}: check the name with the info module (gather_subset: sds)")
        members = [one or {}]
        path = f"/sds/{p['sds']}/maintenance"
        what = f"SDS {p['sds']}"
    else:
        fs = m.find(m.client.fault_sets, p["fault_set"], "fault set")
        if fs is None:
            m.module.fail_json(msg=f"no fault set {p['fault_set']}: check the name with the info module (gather_subset: fault_sets)")
        names = (fs or {}).get("sds_names") or []
        if not names:
            m.module.fail_json(msg=f"fault set {p['fault_set']} holds no SDS: nothing to put into maintenance")
        members = [m.find(m.client.sds, n, "SDS") or {"name": n} for n in names]
        path = f"/fault-sets/{p['fault_set']}/maintenance"
        what = f"fault set {p['fault_set']}"

    before = view(members)
    if enter:
        other = [s["name"] for s in members if mstate(s)["mode"] not in ("", p["mode"])]
        if other:
            m.module.fail_json(
                msg=f"{', '.join(other)} already in {mstate(members[0])['mode']} maintenance, not {p['mode']}: "
                f"take {what} out of maintenance first (state=absent)"
            )
        need = any(mstate(s)["mode"] != p["mode"] for s in members)
        if need:
            m.write(
                None,
                m.client.transport.request,
                "POST",
                path,
                json_body={"mode": p["mode"]},
                doing=f"put {what} into {p['mode']} maintenance",
            )
    else:
        need = any(mstate(s)["mode"] or mstate(s)["state"] for s in members)
        if need:
            m.write(None, m.client.transport.request, "DELETE", path, doing=f"take {what} out of maintenance")
    after_view = {n: ({"mode": p["mode"], "state": "in-maintenance"} if enter else {"mode": "", "state": ""}) for n in before}

    waited = 0.0
    names = [str(s["name"]) for s in members]
    if p["wait"] and not m.check_mode:
        start = time.monotonic()
        deadline = start + p["wait_timeout"]
        last = ""
        while True:
            members = [m.find(m.client.sds, n, "SDS") or {"name": n} for n in names]
            rebuild = (m.call("read the system", m.client.system.get).raw or {}).get("rebuild") or {}
            if enter:
                done = all(mstate(s)["state"] == "in-maintenance" for s in members)
            else:
                done = (
                    all(not mstate(s)["state"] for s in members)
                    and not rebuild.get("degraded_groups")
                    and not rebuild.get("resyncing_groups")
                )
            last = "; ".join(f"{s.get('name')}: {mstate(s)['state'] or 'normal'}{'' if s.get('up', True) else ' (down)'}" for s in members)
            last += f"; degraded groups {rebuild.get('degraded_groups', 0)}, resyncing {rebuild.get('resyncing_groups', 0)}"
            if done:
                break
            if time.monotonic() >= deadline:
                if enter:
                    m.module.fail_json(
                        msg=f"{what} is not in maintenance after {p['wait_timeout']} s ({last}): do NOT shut it down; "
                        f"the request stays in effect: check the cluster's health (rebuilds need live partners "
                        f"and spare capacity) and run again to keep waiting, or state=absent to cancel",
                        changed=m.changed,
                        sds=members,
                    )
                m.module.fail_json(
                    msg=f"{what} has not finished resyncing after {p['wait_timeout']} s ({last}): check that its "
                    f"SDSs are up and run again to keep waiting",
                    changed=m.changed,
                    sds=members,
                )
            time.sleep(max(1, p["poll_interval"]))
        waited = round(time.monotonic() - start, 1)
        after_view = view(members)
    elif not m.check_mode and m.changed:
        members = [m.find(m.client.sds, n, "SDS") or {"name": n} for n in names]
        after_view = view(members)
    elif not m.changed:
        after_view = before
    m.set_diff({"maintenance": before}, {"maintenance": after_view})
    m.exit(sds=members, waited_seconds=waited)


if __name__ == "__main__":
    main()
