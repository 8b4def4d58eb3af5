#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)

from __future__ import annotations

DOCUMENTATION = r"""
module: user
short_description: Create, update or delete a Cairn API user
version_added: "0.1.0"
description:
  - Users of the gateway API with a role (V(admin), V(operator), V(monitor)).
  - Idempotent; supports check mode and diff. Passwords are never shown or logged; the gateway
    cannot compare them, so they are only sent on creation unless O(update_password=always).
options:
  name:
    description: The user name.
    type: str
    required: true
  role:
    description: V(monitor) reads; V(operator) also manages volumes, hosts, mappings and maintenance; V(admin) does everything.
    type: str
    choices: [admin, operator, monitor]
  user_password:
    description: The user's password (at least what the gateway requires). Never logged. Required to create the user.
    type: str
  update_password:
    description: V(on_create) sets O(user_password) only when creating the user; V(always) sets it on every run (always changed).
    type: str
    choices: [on_create, always]
    default: on_create
  state:
    description: V(present) creates or updates the user; V(absent) deletes it (the last admin cannot be deleted).
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - cairn.storage.cairn
author:
  - Cairn developers (@cairn-storage)
"""

EXAMPLES = r"""
- name: A read-only user for the monitoring system
  cairn.storage.user:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    name: prometheus
    role: monitor
    user_password: "{{ vault_prometheus_password }}"
  delegate_to: localhost
"""

RETURN = r"""
user:
  description: The user as the gateway shows it (name and role; empty after a delete).
  returned: always
  type: dict
  sample: {"name": "prometheus", "role": "monitor"}
"""

from ansible_collections.cairn.storage.plugins.module_utils.cairn import CairnModule, compare_view

KEYS = ["name", "role"]


def main() -> None:
    m = CairnModule(
        dict(
            name=dict(type="str", required=True),
            role=dict(type="str", choices=["admin", "operator", "monitor"]),
            user_password=dict(type="str", no_log=True),
            update_password=dict(type="str", choices=["on_create", "always"], default="on_create", no_log=False),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        )
    )
    p = m.params
    api = m.client.users
    name = p["name"]
    # Users have no id; they are looked up in the list (a handful of objects), which also
    # keeps a missing user an answer rather than an error whatever GET /users/{name} says.
    cur = next((dict(u.raw) for u in m.call("list users", api.list) if u.raw.get("name") == name), None)
    if p["state"] == "absent":
        if cur is not None:
            m.write(None, api.delete, name, doing=f"delete user {name}")
        m.set_diff(compare_view(cur, KEYS), {})
        m.exit(user={})
    after = cur
    if cur is None:
        if not p["role"] or not p["user_password"]:
            m.module.fail_json(msg=f"user {name} does not exist: give role and user_password to create it")
        after = m.write(
            {"name": name, "role": p["role"]}, api.create, name, role=p["role"], password=p["user_password"], doing=f"create user {name}"
        )
    else:
        change = {}
        if p["role"] and p["role"] != cur.get("role"):
            change["role"] = p["role"]
        if p["user_password"] and p["update_password"] == "always":  # noqa: S105
            change["password"] = p["user_password"]
        if change:
            shown = {k: v for k, v in change.items() if k != "password"}
            after = m.write(dict(cur, **shown), api.update, name, doing=f"update user {name}", **change)
    m.set_diff(compare_view(cur, KEYS), compare_view(after, KEYS))
    m.exit(user=after or {})


if __name__ == "__main__":
    main()
