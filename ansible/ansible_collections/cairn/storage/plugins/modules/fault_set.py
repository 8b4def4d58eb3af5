#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)

from __future__ import annotations

DOCUMENTATION = r"""
module: fault_set
short_description: Create or delete a Cairn fault set
version_added: "0.1.0"
description:
  - A fault set groups SDSs that may fail together (a rack, a power feed); the two copies of
    every chunk are never in the same fault set, and maintenance can cover a whole fault set.
  - Idempotent; supports check mode and diff.
options:
  name:
    description: Name of the fault set.
    type: str
    required: true
  protection_domain:
    description: Protection domain (name or id) the fault set belongs to. Required to create it.
    type: str
  state:
    description: V(present) creates it when missing; V(absent) deletes it (refused while SDSs belong to it).
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - cairn.storage.cairn
author:
  - Cairn developers (@cairn-storage)
"""

EXAMPLES = r"""
- name: One fault set per rack
  cairn.storage.fault_set:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    name: "{{ item }}"
    protection_domain: pd1
  loop: [rack1, rack2, rack3]
  delegate_to: localhost
"""

RETURN = r"""
fault_set:
  description: The fault set as the gateway shows it (empty after a delete).
  returned: always
  type: dict
  sample: {"id": "1a2b3c4d5e6f7081", "name": "rack1", "protection_domain_name": "pd1", "sds_names": ["sds1"]}
"""

from ansible_collections.cairn.storage.plugins.module_utils.cairn import CairnModule, compare_view

KEYS = ["name", "protection_domain_name"]


def main() -> None:
    m = CairnModule(
        dict(
            name=dict(type="str", required=True),
            protection_domain=dict(type="str"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        )
    )
    p = m.params
    fss = m.client.fault_sets
    cur = m.find(fss, p["name"], "fault set")
    if p["state"] == "absent":
        if cur is not None:
            m.write(None, fss.delete, p["name"], doing=f"delete fault set {p['name']}")
        m.set_diff(compare_view(cur, KEYS), {})
        m.exit(fault_set={})
    after = cur
    if cur is None:
        if not p["protection_domain"]:
            m.module.fail_json(msg=f"fault set {p['name']} does not exist: give protection_domain to create it")
        after = m.write(
            {"name": p["name"], "protection_domain_name": p["protection_domain"]},
            fss.create,
            p["name"],
            protection_domain=p["protection_domain"],
            doing=f"create fault set {p['name']}",
        )
    elif p["protection_domain"] and p["protection_domain"] not in (cur.get("protection_domain_name"), cur.get("protection_domain_id")):
        m.module.fail_json(
            msg=f"fault set {p['name']} is in protection domain {cur.get('protection_domain_name')}, "
            f"not {p['protection_domain']}: a fault set cannot move; delete it and create it again"
        )
    m.set_diff(compare_view(cur, KEYS), compare_view(after, KEYS))
    m.exit(fault_set=after or {})


if __name__ == "__main__":
    main()
