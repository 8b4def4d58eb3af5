#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)

from __future__ import annotations

DOCUMENTATION = r"""
module: upgrade_bundle
short_description: Store a Cairn update bundle on the gateway
version_added: "0.1.0"
description:
  - Stores an update bundle (the file C(cairn bundle --bin DIR --out FILE) wrote) on the cluster's
    gateway, where SVMs can be ordered to install it. The gateway checks the bundle (gzip and tar,
    its manifest's format and version, each binary's SHA-256) before it stores it; a bundle it
    refuses fails the task with its reason.
  - Idempotent by content. The version is read from the file's C(manifest.json) on the machine the
    module runs on (usually the controller, with C(delegate_to=localhost)). A bundle of that
    version with the same SHA-256 already stored is no change; one with another digest is
    replaced.
  - Rolling the SVMs to the stored version, one fault set at a time in instant maintenance, is
    the vSphere plugin's (its Upgrade page, or C(POST /api/v1/systems/{system}/upgrade) on the
    plugin server).
options:
  src:
    description: The bundle file (at most 256 MiB).
    type: path
    required: true
extends_documentation_fragment:
  - cairn.storage.cairn
author:
  - Cairn developers (@cairn-storage)
"""

EXAMPLES = r"""
- name: Store the new release's bundle
  cairn.storage.upgrade_bundle:
    gateways: ["10.0.0.11:8443"]
    username: admin
    password: "{{ cairn_admin_password }}"
    src: "{{ playbook_dir }}/files/cairn-0.4.0.tgz"
  delegate_to: localhost
  register: bundle

- name: Show it
  ansible.builtin.debug:
    msg: "{{ bundle.bundle.version }} stored, SHA-256 {{ bundle.bundle.sha256 }}"
"""

RETURN = r"""
bundle:
  description: The bundle as the gateway lists it (in check mode, as it would be).
  returned: always
  type: dict
  sample: {"version": "0.4.0", "sha256": "9f86d081884c7d65...", "size": 24117248, "uploaded": "2026-11-29T21:40:00Z"}
"""

import hashlib
import json
import os
import tarfile

from ansible_collections.cairn.storage.plugins.module_utils.cairn import CairnModule

MAX_BUNDLE = 256 << 20  # the gateway's bound
MAX_MANIFEST = 64 << 10


def read_bundle(path: str) -> tuple[str, str, int]:
    """The version in the bundle's manifest.json, its SHA-256 and its size; ValueError says what is wrong."""
    size = os.path.getsize(path)
    if size > MAX_BUNDLE:
        raise ValueError(f"it is {size >> 20} MiB; the gateway takes update bundles up to {MAX_BUNDLE >> 20} MiB")
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    try:
        with tarfile.open(path, "r:gz") as tf:
            member = next((m for m in tf if m.name == "manifest.json"), None)
            if member is None or not member.isfile() or member.size > MAX_MANIFEST:
                raise ValueError("it holds no manifest.json (or one over 64 KiB)")
            fobj = tf.extractfile(member)
            if fobj is None:
                raise ValueError("its manifest.json cannot be read")
            manifest = json.loads(fobj.read(MAX_MANIFEST))
    except (tarfile.TarError, OSError, EOFError) as e:
        raise ValueError(f"it is not a gzip-compressed tar file ({e})") from e
    except json.JSONDecodeError as e:
        raise ValueError(f"its manifest.json is not JSON ({e})") from e
    version = manifest.get("version") if isinstance(manifest, dict) else None
    if not isinstance(version, str) or not version:
        raise ValueError("its manifest.json names no version")
    return version, digest.hexdigest(), size


def main() -> None:
    m = CairnModule(dict(src=dict(type="path", required=True)))
    src = m.params["src"]
    if not os.path.isfile(src):
        m.module.fail_json(msg=f"src {src}: no such file: give the file `cairn bundle --bin DIR --out FILE` wrote")
    try:
        version, sha256, size = read_bundle(src)
    except ValueError as e:
        m.module.fail_json(msg=f"src {src} is no Cairn update bundle: {e}: build one with `cairn bundle --bin DIR --out FILE`")
        return
    api = m.client.upgrades
    stored = {b.version: dict(b.raw) for b in m.call("list the stored bundles", api.bundles)}
    before = stored.get(version)
    if before is not None and before.get("sha256") == sha256:
        m.exit(bundle=before, msg=f"bundle {version} is stored already with the same SHA-256")
        return
    after = {"version": version, "sha256": sha256, "size": size}
    m.set_diff({k: before[k] for k in after if k in before} if before else {}, after)
    doing = f"store update bundle {version} from {src}" + (" (replacing the stored one of another digest)" if before else "")
    made = m.write(after, lambda: api.upload(src), doing=doing)
    m.exit(bundle=made)


if __name__ == "__main__":
    main()
