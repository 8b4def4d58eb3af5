#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)

from __future__ import annotations

DOCUMENTATION = r"""
module: mdm_cluster
short_description: Manage the members, tie-breakers and leader of the Cairn MDM cluster
version_added: "0.1.0"
description:
  - The MDM cluster is an etcd cluster of 3 or 5 members, one or two of them tie-breakers (they vote and run no control loop).
  - Adds members (they join as etcd learners and are promoted once caught up, so an addition never breaks quorum),
    removes members (the gateway refuses to go below quorum) and moves the leadership.
  - Idempotent; supports check mode and diff.
options:
  members:
    description:
      - Members that must be in the cluster. Members not listed stay unless O(purge_members=true).
      - A new member's C(cairn mdm) must then be started on its host with C(--join) and the C(--initial-cluster)
        this module returns in RV(added); it becomes a voting member once it has caught up.
    type: list
    elements: dict
    suboptions:
      name:
        description: Member name (the C(--name) of its C(cairn mdm)).
        type: str
        required: true
      peer_url:
        description: Its etcd peer URL, e.g. V(https://10.0.0.14:2380). Required to add it.
        type: str
      tie_breaker:
        description: Only vote (no control loop).
        type: bool
        default: false
  purge_members:
    description: Remove the members not listed in O(members).
    type: bool
    default: false
  leader:
    description:
      - Move the leadership to this member, both etcd's raft leadership and Cairn's control loop (the gateway
        waits up to 15 s for both); a member that already holds both is left alone.
    type: str
extends_documentation_fragment:
  - cairn.storage.cairn
author:
  - Cairn developers (@cairn-storage)
"""

EXAMPLES = r"""
- name: Grow from 3 to 5 members, the new ones as tie-breakers
  cairn.storage.mdm_cluster:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    members:
      - name: mdm4
        peer_url: https://10.0.0.14:2380
        tie_breaker: true
      - name: mdm5
        peer_url: https://10.0.0.15:2380
        tie_breaker: true
  delegate_to: localhost

- name: Lead from mdm1 (before patching the others)
  cairn.storage.mdm_cluster:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    leader: mdm1
  delegate_to: localhost
"""

RETURN = r"""
members:
  description: The members as the gateway shows them at the end.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "mdm1", "peer_urls": ["https://10.0.0.11:2380"], "learner": false, "raft_leader": true,
            "tie_breaker": false, "cairn_leader": true}]
added:
  description:
    - The members listed in O(members) that are added but not started yet (by this run or an earlier one),
      each with the C(--initial-cluster) to start it with
      (C(cairn mdm --name NAME --peer-url URL --join --initial-cluster ...)); that value is empty in check mode.
    - Until it is started, an added member is listed in RV(members) as a learner with C(started=false),
      named after its peer URL.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "mdm4", "started": false, "initial_cluster": "mdm1=https://10.0.0.11:2380,...,mdm4=https://10.0.0.14:2380"}]
"""

from typing import Any

from ansible_collections.cairn.storage.plugins.module_utils.cairn import CairnModule


def view(members: list[dict[str, Any]]) -> dict[str, Any]:
    return {str(x.get("name")): {"tie_breaker": bool(x.get("tie_breaker")), "leader": leads(x)} for x in members}


def leads(x: dict[str, Any]) -> bool:
    """A member leads when it holds both the raft leadership and Cairn's control loop."""
    return bool(x.get("raft_leader")) and bool(x.get("cairn_leader"))


def main() -> None:
    m = CairnModule(
        dict(
            members=dict(
                type="list",
                elements="dict",
                options=dict(
                    name=dict(type="str", required=True),
                    peer_url=dict(type="str"),
                    tie_breaker=dict(type="bool", default=False),
                ),
            ),
            purge_members=dict(type="bool", default=False),
            leader=dict(type="str"),
        )
    )
    p = m.params
    api = m.client.mdm
    cur = [dict(x.raw) for x in m.call("list the MDM members", api.list)]
    # A member added but not started yet has no name in etcd: it is known by its peer URL.
    have = {str(x.get("name")): x for x in cur if x.get("started", True)}
    pending = {str(u): x for x in cur if not x.get("started", True) for u in x.get("peer_urls") or []}
    after = [dict(x) for x in cur]
    wanted = {w["name"]: w for w in p["members"] or []}
    added: list[dict[str, Any]] = []
    for name, w in wanted.items():
        h = have.get(name)
        if h is not None:
            if bool(h.get("tie_breaker")) != w["tie_breaker"]:
                m.module.fail_json(
                    msg=f"MDM member {name} is {'a' if h.get('tie_breaker') else 'not a'} tie-breaker: a member cannot "
                    f"change that; remove it and add it again"
                )
            continue
        if not w["peer_url"]:
            m.module.fail_json(msg=f"MDM member {name} is not in the cluster: give its peer_url to add it")
        if w["peer_url"] in pending:
            # Added by an earlier run, not started yet: nothing to change; the gateway answers a
            # repeated addition with the --initial-cluster again (outside check mode).
            r = {}
            if not m.check_mode:
                r = dict(m.call(f"read how to start MDM member {name}", api.add, name, w["peer_url"], tie_breaker=w["tie_breaker"]).raw)
            added.append({"name": name, "initial_cluster": r.get("initial_cluster", ""), "started": False})
            continue
        r = m.write(None, api.add, name, w["peer_url"], tie_breaker=w["tie_breaker"], doing=f"add MDM member {name}") or {}
        added.append({"name": name, "initial_cluster": r.get("initial_cluster", ""), "started": False})
        after.append({"name": name, "peer_urls": [w["peer_url"]], "tie_breaker": w["tie_breaker"], "learner": True})
    if p["purge_members"]:
        keep = {str(w["peer_url"]) for w in wanted.values() if w["peer_url"]}
        for x in cur:
            name = str(x.get("name"))
            started = x.get("started", True)
            if (started and name in wanted) or (not started and keep & set(x.get("peer_urls") or [])):
                continue
            # By etcd id: a member not started has no name the gateway could find it by.
            m.write(None, m.client.transport.request, "DELETE", f"/mdm/members/{x.get('id') or name}", doing=f"remove MDM member {name}")
            after = [y for y in after if y.get("name") != name]
    if p["leader"]:
        if p["leader"] not in {str(x.get("name")) for x in after}:
            m.module.fail_json(msg=f"no MDM member {p['leader']} (members: {', '.join(sorted(have))}): name a member as leader")
        if not leads(have.get(p["leader"], {})):
            m.write(
                None,
                m.client.transport.request,
                "POST",
                "/mdm/leader",
                json_body={"name": p["leader"]},
                doing=f"move the MDM leadership to {p['leader']}",
            )
            after = [dict(x, raft_leader=x.get("name") == p["leader"], cairn_leader=x.get("name") == p["leader"]) for x in after]
    if m.changed and not m.check_mode:
        after = [dict(x.raw) for x in m.call("list the MDM members", api.list)]
    m.set_diff({"members": view(cur)}, {"members": view(after)})
    m.exit(members=after, added=added)


if __name__ == "__main__":
    main()
