#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)

from __future__ import annotations

DOCUMENTATION = r"""
module: volume
short_description: Create, grow, limit, map or delete a Cairn volume
version_added: "0.1.0"
description:
  - Creates a volume in a storage pool, grows it, sets its QoS limits, maps it to hosts with an
    access mode (and per-mapping limits), unmaps it, renames it or deletes it.
  - Idempotent; supports check mode and diff.
options:
  name:
    description: Name of the volume.
    type: str
    required: true
  new_name:
    description: Rename the volume to this name.
    type: str
  pool:
    description: Storage pool (name or id). Required to create the volume.
    type: str
  size:
    description:
      - Size in bytes, or a number with a unit (V(8GiB), V(1TiB)); a multiple of the allocation unit (1 GiB).
      - Volumes only grow; a smaller size than the current one fails and changes nothing.
    type: str
  thin:
    description: Thin (allocated on first write) or thick (capacity reserved). Set at creation only.
    type: bool
  iops_limit:
    description: I/Os per second; 0 is unlimited.
    type: int
  bandwidth_limit:
    description: Bytes per second; 0 is unlimited.
    type: int
  mappings:
    description:
      - Hosts the volume is mapped to. Hosts not listed stay mapped unless O(purge_mappings=true).
      - Changing the access mode of a mapping unmaps and maps the volume again on that host.
    type: list
    elements: dict
    suboptions:
      host:
        description: Host (name or id).
        type: str
        required: true
      access_mode:
        description: V(read_write) or V(read_only).
        type: str
        choices: [read_write, read_only]
        default: read_write
      iops_limit:
        description: I/Os per second on this host; 0 is unlimited (the tighter of volume and mapping limit applies).
        type: int
      bandwidth_limit:
        description: Bytes per second on this host; 0 is unlimited.
        type: int
  purge_mappings:
    description: Unmap the volume from every host not in O(mappings).
    type: bool
    default: false
  state:
    description:
      - V(present) creates or updates the volume; V(absent) deletes it (the gateway refuses while it is
        mapped; unmap it first, for example with O(mappings=[]) and O(purge_mappings=true)).
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - cairn.storage.cairn
author:
  - Cairn developers (@cairn-storage)
"""

EXAMPLES = r"""
- name: A 64 GiB datastore volume for two ESXi hosts, limited to 20k IOPS
  cairn.storage.volume:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    name: ds01
    pool: pool1
    size: 64GiB
    iops_limit: 20000
    mappings:
      - host: esx1
      - host: esx2
  delegate_to: localhost

- name: Grow it, and give a backup host read-only access
  cairn.storage.volume:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    name: ds01
    size: 128GiB
    mappings:
      - host: backup1
        access_mode: read_only
  delegate_to: localhost

- name: Unmap it everywhere and delete it
  block:
    - cairn.storage.volume:
        gateways: ["10.0.0.11:8443"]
        username: admin
        password: "{{ cairn_admin_password }}"
        name: ds01
        mappings: []
        purge_mappings: true
    - cairn.storage.volume:
        gateways: ["10.0.0.11:8443"]
        username: admin
        password: "{{ cairn_admin_password }}"
        name: ds01
        state: absent
  delegate_to: localhost
"""

RETURN = r"""
volume:
  description: The volume as the gateway shows it (empty after a delete).
  returned: always
  type: dict
  sample: {"id": "0b10e9bd07df7492", "name": "ds01", "pool_name": "pool1", "size": 68719476736, "thin": true,
           "iops_limit": 20000, "bandwidth_limit": 0, "wwn": "60ab18d91c10f0f80b10e9bd07df7492",
           "mappings": [{"host_name": "esx1", "lun": 0, "read_only": false}]}
"""

from typing import Any

from ansible_collections.cairn.storage.plugins.module_utils.cairn import CairnModule, GiB, differences, parse_size

KEYS = ["name", "pool_name", "size", "thin", "iops_limit", "bandwidth_limit"]


def view(v: dict[str, Any] | None) -> dict[str, Any]:
    """What the diff shows: the managed fields and the mappings by host."""
    if not v:
        return {}
    out = {k: v.get(k) for k in KEYS if k in v}
    out["mappings"] = {
        str(mp.get("host_name") or mp.get("host")): {
            "access_mode": "read_only" if mp.get("read_only") else "read_write",
            **{k: mp[k] for k in ("iops_limit", "bandwidth_limit") if mp.get(k) is not None},
        }
        for mp in v.get("mappings") or []
    }
    return out


def main() -> None:
    m = CairnModule(
        dict(
            name=dict(type="str", required=True),
            new_name=dict(type="str"),
            pool=dict(type="str"),
            size=dict(type="str"),
            thin=dict(type="bool"),
            iops_limit=dict(type="int"),
            bandwidth_limit=dict(type="int"),
            mappings=dict(
                type="list",
                elements="dict",
                options=dict(
                    host=dict(type="str", required=True),
                    access_mode=dict(type="str", choices=["read_write", "read_only"], default="read_write"),
                    iops_limit=dict(type="int"),
                    bandwidth_limit=dict(type="int"),
                ),
            ),
            purge_mappings=dict(type="bool", default=False),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        )
    )
    p = m.params
    api = m.client.volumes
    name = p["name"]
    try:
        size = parse_size(p["size"])
    except ValueError as e:
        m.module.fail_json(msg=str(e))
    for k in ("iops_limit", "bandwidth_limit"):
        if p[k] is not None and p[k] < 0:
            m.module.fail_json(msg=f"{k} {p[k]}: give 0 (unlimited) or a positive number")

    cur = m.find(api, name, "volume")
    if cur is None and p["new_name"] and p["state"] == "present":
        cur = m.find(api, p["new_name"], "volume")  # renamed by an earlier run
        if cur is not None:
            name = p["new_name"]
    if p["state"] == "absent":
        if cur is not None:
            m.write(None, api.delete, name, doing=f"delete volume {name}")
        m.set_diff(view(cur), {})
        m.exit(volume={})

    after = cur
    if cur is None:
        if not p["pool"] or size is None:
            m.module.fail_json(msg=f"volume {name} does not exist: give pool and size to create it")
        fields = {k: p[k] for k in ("thin", "iops_limit", "bandwidth_limit") if p[k] is not None}
        would = dict(fields, name=name, pool_name=p["pool"], size=size, mappings=[])
        after = m.write(would, api.create, name, pool=p["pool"], size=size, doing=f"create volume {name}", **fields)
    else:
        if p["pool"] and p["pool"] not in (cur.get("pool_name"), cur.get("pool_id")):
            m.module.fail_json(msg=f"volume {name} is in pool {cur.get('pool_name')}, not {p['pool']}: volumes cannot move between pools")
        if p["thin"] is not None and p["thin"] != cur.get("thin"):
            m.module.fail_json(msg=f"volume {name} is {'thin' if cur.get('thin') else 'thick'}: thin is set at creation only")
        if size is not None and size < int(cur.get("size") or 0):
            m.module.fail_json(
                msg=f"volume {name} has {cur.get('size')} bytes ({int(cur.get('size') or 0) / GiB:g} GiB): "
                f"volumes only grow; give a size of at least that"
            )
        change = differences(cur, {"size": size, "iops_limit": p["iops_limit"], "bandwidth_limit": p["bandwidth_limit"]})
        if p["new_name"] and p["new_name"] != cur.get("name"):
            change["name"] = p["new_name"]
        if change:
            after = m.write(dict(cur, **change), api.update, name, doing=f"update volume {name}", **change)
            name = change.get("name", name)

    if p["mappings"] is not None:
        have = {str(mp.get("host_name")): mp for mp in (after or {}).get("mappings") or []}
        want = {mp["host"]: mp for mp in p["mappings"]}
        mappings = [dict(mp) for mp in (after or {}).get("mappings") or []]
        for host, w in want.items():
            ro = w["access_mode"] == "read_only"
            limits = {k: w[k] for k in ("iops_limit", "bandwidth_limit") if w[k] is not None}
            h = have.get(host)
            if h is not None and bool(h.get("read_only")) == ro and not differences(h, limits):
                continue
            if h is not None and bool(h.get("read_only")) != ro:
                m.write(None, api.unmap, name, host=host, doing=f"unmap volume {name} from host {host} (to change its access mode)")
                mappings = [mp for mp in mappings if mp.get("host_name") != host]
            body = {"read_only": ro} if ro else {}
            body.update(limits)
            res = m.write(
                None,
                m.client.transport.request,
                "POST",
                f"/volumes/{name}/map",
                json_body=dict(body, host=host),
                doing=f"map volume {name} to host {host}",
            )
            mappings = [mp for mp in mappings if mp.get("host_name") != host] + [dict(limits, host_name=host, read_only=ro)]
            if res is not None and isinstance(getattr(res, "body", None), dict):
                mappings = list(res.body.get("mappings") or mappings)
        if p["purge_mappings"]:
            for host in have:
                if host not in want:
                    m.write(None, api.unmap, name, host=host, doing=f"unmap volume {name} from host {host}")
                    mappings = [mp for mp in mappings if mp.get("host_name") != host]
        if after is not None:
            after = dict(after, mappings=mappings)
    if m.changed and not m.check_mode:
        after = m.find(api, name, "volume")
    m.set_diff(view(cur), view(after))
    m.exit(volume=after or {})


if __name__ == "__main__":
    main()
