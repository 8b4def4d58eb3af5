#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)

from __future__ import annotations

DOCUMENTATION = r"""
module: host
short_description: Create, update or delete a Cairn host (an iSCSI initiator or an NBD client)
version_added: "0.1.0"
description:
  - A host is what volumes are mapped to; an ESXi host (iSCSI, by initiator IQN, optional CHAP)
    or a Linux host using NBD.
  - Idempotent; supports check mode and diff. The CHAP secret is never shown or logged; the
    gateway never returns it, so it is only sent on creation unless O(update_secret=always).
options:
  name:
    description: Name of the host.
    type: str
    required: true
  new_name:
    description: Rename the host to this name.
    type: str
  type:
    description: V(iscsi) (ESXi and other iSCSI initiators) or V(nbd) (Linux NBD clients). Required to create it.
    type: str
    choices: [iscsi, nbd]
  iqn:
    description: The iSCSI initiator name (RFC 3720), e.g. V(iqn.1998-01.com.vmware:esx01-4c1d2f0a).
    type: str
  chap_user:
    description: CHAP user name (iSCSI). V("") together with O(chap_secret=) removes CHAP.
    type: str
  chap_secret:
    description: CHAP secret (12-255 characters). Never logged.
    type: str
  update_secret:
    description: V(on_create) sends O(chap_secret) only when creating the host; V(always) sends it on every run (always changed).
    type: str
    choices: [on_create, always]
    default: on_create
  state:
    description: V(present) creates or updates it; V(absent) deletes it (refused while volumes are mapped to it).
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - cairn.storage.cairn
author:
  - Cairn developers (@cairn-storage)
"""

EXAMPLES = r"""
- name: An ESXi host with CHAP
  cairn.storage.host:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    name: esx01
    type: iscsi
    iqn: iqn.1998-01.com.vmware:esx01-4c1d2f0a
    chap_user: esx01
    chap_secret: "{{ vault_esx01_chap_secret }}"
  delegate_to: localhost

- name: A KVM hypervisor using NBD
  cairn.storage.host:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    name: kvm01
    type: nbd
  delegate_to: localhost
"""

RETURN = r"""
host:
  description: The host as the gateway shows it (empty after a delete); the CHAP secret is never returned.
  returned: always
  type: dict
  sample: {"id": "0be59b73b2e0b06a", "name": "esx01", "type": "iscsi", "iqn": "iqn.1998-01.com.vmware:esx01-4c1d2f0a",
           "chap_user": "esx01", "chap": true, "volume_names": ["ds01"]}
"""

from ansible_collections.cairn.storage.plugins.module_utils.cairn import CairnModule, compare_view, differences

KEYS = ["name", "type", "iqn", "chap_user", "chap"]


def main() -> None:
    m = CairnModule(
        dict(
            name=dict(type="str", required=True),
            new_name=dict(type="str"),
            type=dict(type="str", choices=["iscsi", "nbd"]),
            iqn=dict(type="str"),
            chap_user=dict(type="str"),
            chap_secret=dict(type="str", no_log=True),
            update_secret=dict(type="str", choices=["on_create", "always"], default="on_create", no_log=False),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        )
    )
    p = m.params
    api = m.client.hosts
    name = p["name"]
    cur = m.find(api, name, "host")
    if cur is None and p["new_name"] and p["state"] == "present":
        cur = m.find(api, p["new_name"], "host")
        if cur is not None:
            name = p["new_name"]
    if p["state"] == "absent":
        if cur is not None:
            m.write(None, api.delete, name, doing=f"delete host {name}")
        m.set_diff(compare_view(cur, KEYS), {})
        m.exit(host={})
    after = cur
    if cur is None:
        if not p["type"]:
            m.module.fail_json(msg=f"host {name} does not exist: give type (iscsi or nbd) to create it")
        fields = {k: p[k] for k in ("iqn", "chap_user", "chap_secret") if p[k] is not None}
        would = {k: v for k, v in fields.items() if k != "chap_secret"}
        would.update(name=name, type=p["type"], chap=bool(p["chap_secret"]))
        after = m.write(would, api.create, name, type=p["type"], doing=f"create host {name}", **fields)
    else:
        if p["type"] and p["type"] != cur.get("type"):
            m.module.fail_json(msg=f"host {name} is of type {cur.get('type')}, not {p['type']}: delete it and create it again")
        change = differences(cur, {"iqn": p["iqn"], "chap_user": p["chap_user"]})
        if p["new_name"] and p["new_name"] != cur.get("name"):
            change["name"] = p["new_name"]
        if p["chap_secret"] is not None and (p["update_secret"] == "always" or (p["chap_secret"] and not cur.get("chap"))):  # noqa: S105
            change["chap_secret"] = p["chap_secret"]
        if change:
            shown = {k: v for k, v in change.items() if k != "chap_secret"}
            if "chap_secret" in change:
                shown["chap"] = bool(change["chap_secret"])
            after = m.write(dict(cur, **shown), api.update, name, doing=f"update host {name}", **change)
    m.set_diff(compare_view(cur, KEYS), compare_view(after, KEYS))
    m.exit(host=after or {})


if __name__ == "__main__":
    main()
