#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)

from __future__ import annotations

DOCUMENTATION = r"""
module: join_token
short_description: Create or revoke a one-time join token for a new Cairn node
version_added: "0.1.0"
description:
  - A join token lets a new node (an SVM, or a Linux host set up by hand) get its cluster
    certificate once, for the roles the token names (C(cairn pki join --token-file FILE)).
  - The token is a secret. This module writes it to O(dest), mode 0600, on the machine the
    module runs on (usually the controller, with C(delegate_to=localhost)), and never returns
    it; copy the file to the node, then delete it.
  - A token is spent once and expires after O(ttl_seconds); each creation makes a new one, so
    O(state=present) does nothing when O(dest) exists already (like C(creates)), which keeps a
    second run from making tokens nobody spends.
options:
  roles:
    description:
      - The certificate roles the token may be spent on. Required with O(state=present).
    type: list
    elements: str
    choices: [mdm, gateway, sds, target, nbd, client, host]
  ttl_seconds:
    description: How long the token may be spent (60 to 604800 seconds).
    type: int
    default: 3600
  dest:
    description:
      - File to write the new token to (mode 0600). Required with O(state=present).
      - When it exists, no token is made and the module reports no change.
    type: path
  id:
    description: The token to revoke (O(state=absent)); the id is shown by C(cairnctl join-token ls) and returned on creation.
    type: str
  state:
    description: V(present) creates a token into O(dest); V(absent) revokes token O(id) (no change when it is spent, revoked or unknown).
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - cairn.storage.cairn
author:
  - Cairn developers (@cairn-storage)
"""

EXAMPLES = r"""
- name: A token for a new SDS host, on the controller
  cairn.storage.join_token:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    roles: [sds]
    dest: "{{ playbook_dir }}/tokens/{{ inventory_hostname }}"
  delegate_to: localhost
  register: token

- name: Give it to the host (cairn-certs spends it at its next start)
  ansible.builtin.copy:
    src: "{{ playbook_dir }}/tokens/{{ inventory_hostname }}"
    dest: /etc/cairn/join-token
    mode: "0600"

- name: Revoke it if the host never came
  cairn.storage.join_token:
    id: "{{ token.join_token.id }}"
    state: absent
  delegate_to: localhost
"""

RETURN = r"""
join_token:
  description: The token as the gateway lists it, without its secret (empty when nothing was made or it was revoked).
  returned: always
  type: dict
  sample: {"id": "3f9c0d1e", "roles": ["sds"], "expires": "2026-11-29T02:00:00Z", "created_by": "admin"}
"""

import os
from typing import Any

from ansible_collections.cairn.storage.plugins.module_utils.cairn import CairnModule

SHOWN = ["id", "roles", "expires", "created_by", "created"]


def shown(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: raw[k] for k in SHOWN if k in raw}


def write_secret(path: str, secret: str) -> None:
    """Create path (it must not exist) with mode 0600 and the secret, or leave nothing."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secret + "\n")
    except BaseException:
        os.unlink(path)
        raise


def main() -> None:
    m = CairnModule(
        dict(
            roles=dict(type="list", elements="str", choices=["mdm", "gateway", "sds", "target", "nbd", "client", "host"]),
            ttl_seconds=dict(type="int", default=3600),
            dest=dict(type="path"),
            id=dict(type="str"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        ),
        required_if=[("state", "present", ("roles", "dest")), ("state", "absent", ("id",))],
    )
    p = m.params
    api = m.client.join_tokens
    if p["state"] == "absent":
        listed = m.call("list join tokens", api.list)
        current = next((t for t in listed if t.id == p["id"]), None)
        if current is None:
            m.exit(join_token={}, msg=f"join token {p['id']} is spent, revoked or unknown: nothing to revoke")
            return
        m.set_diff(shown(dict(current.raw)), {})
        m.write(None, api.revoke, p["id"], doing=f"revoke join token {p['id']}")
        m.exit(join_token={})

    dest = p["dest"]
    if os.path.lexists(dest):
        m.exit(join_token={}, msg=f"{dest} exists: no token made (delete it to make a new one)")
    if not os.path.isdir(os.path.dirname(os.path.abspath(dest))):
        m.module.fail_json(msg=f"dest {dest}: its directory does not exist: create it first")
    if not 60 <= p["ttl_seconds"] <= 7 * 24 * 3600:
        m.module.fail_json(msg=f"ttl_seconds {p['ttl_seconds']}: give 60 to 604800 (one minute to a week)")
    roles = sorted(set(p["roles"]))
    if not roles:
        m.module.fail_json(msg="roles is empty: name the roles the node needs (e.g. [sds])")
    made = m.write({"roles": roles}, api.create, roles, ttl_seconds=p["ttl_seconds"], doing=f"create a join token for {', '.join(roles)}")
    if m.check_mode:
        m.set_diff({}, {"roles": roles})
        m.exit(join_token={})
    secret = str(made.pop("token", "")) if isinstance(made, dict) else ""
    if not secret:
        m.module.fail_json(
            msg="the gateway's answer holds no token: nothing was written; revoke it with cairnctl join-token rm",
            join_token=shown(made or {}),
        )
    try:
        write_secret(dest, secret)
    except OSError as e:
        # The token exists on the gateway but nobody holds it: revoke it rather than leave it.
        tid = made.get("id", "")
        try:
            api.revoke(tid)
        except Exception as revoke_err:
            m.module.fail_json(
                msg=f"dest {dest}: {e}; revoking the unwritten token {tid} failed too ({revoke_err}): cairnctl join-token rm {tid}"
            )
        m.module.fail_json(msg=f"dest {dest}: {e}: the token was revoked; fix the path and run again")
    m.set_diff({}, shown(made))
    m.exit(join_token=shown(made))


if __name__ == "__main__":
    main()
