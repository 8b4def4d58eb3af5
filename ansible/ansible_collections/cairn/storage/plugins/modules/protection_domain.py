#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)

from __future__ import annotations

DOCUMENTATION = r"""
module: protection_domain
short_description: Create, rename or delete a Cairn protection domain
version_added: "0.1.0"
description:
  - A protection domain is a set of SDSs whose devices mirror each other; pools live in one.
  - Idempotent; supports check mode and diff.
options:
  name:
    description: Name of the protection domain.
    type: str
    required: true
  new_name:
    description: Rename the protection domain to this name.
    type: str
  state:
    description:
      - V(present) creates it when missing; V(absent) deletes it (the gateway refuses while
        fault sets, SDSs or pools belong to it, and says which).
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - cairn.storage.cairn
author:
  - Cairn developers (@cairn-storage)
"""

EXAMPLES = r"""
- name: A protection domain
  cairn.storage.protection_domain:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    ca_file: /etc/cairn/gateway-ca.pem
    name: pd1
  delegate_to: localhost

- name: Rename it
  cairn.storage.protection_domain:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    name: pd1
    new_name: pd-rack-a
  delegate_to: localhost
"""

RETURN = r"""
protection_domain:
  description: The protection domain as the gateway shows it (empty after a delete).
  returned: always
  type: dict
  sample: {"id": "0b10e9bd07df7492", "name": "pd1", "sds_count": 3, "pool_count": 1, "fault_set_count": 0}
"""

from ansible_collections.cairn.storage.plugins.module_utils.cairn import CairnModule, compare_view

KEYS = ["name"]


def main() -> None:
    m = CairnModule(
        dict(
            name=dict(type="str", required=True),
            new_name=dict(type="str"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        )
    )
    p = m.params
    pds = m.client.protection_domains
    cur = m.find(pds, p["name"], "protection domain")
    if p["state"] == "absent":
        if cur is not None:
            m.write(None, pds.delete, p["name"], doing=f"delete protection domain {p['name']}")
        m.set_diff(compare_view(cur, KEYS), {})
        m.exit(protection_domain={})
    if cur is None and p["new_name"]:
        renamed = m.find(pds, p["new_name"], "protection domain")
        if renamed is not None:  # renamed by an earlier run
            m.set_diff(compare_view(renamed, KEYS), compare_view(renamed, KEYS))
            m.exit(protection_domain=renamed)
    after = cur
    if cur is None:
        after = m.write({"name": p["name"]}, pds.create, p["name"], doing=f"create protection domain {p['name']}")
    if p["new_name"] and p["new_name"] != (after or {}).get("name"):
        want = dict(after or {}, name=p["new_name"])
        after = m.write(want, pds.update, p["name"], name=p["new_name"], doing=f"rename protection domain {p['name']}")
    m.set_diff(compare_view(cur, KEYS), compare_view(after, KEYS))
    m.exit(protection_domain=after or {})


if __name__ == "__main__":
    main()
