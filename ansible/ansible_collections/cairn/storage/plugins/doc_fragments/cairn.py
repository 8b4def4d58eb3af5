# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)
"""How every cairn.storage module reaches the gateway (shared DOCUMENTATION options)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  gateways:
    description:
      - Gateway addresses, C(host:port) or C(https://host:port).
      - Calls go to the gateway that answered last and fail over to the next one.
      - Falls back to the environment variable E(CAIRN_GATEWAYS) (comma-separated).
    type: list
    elements: str
    required: true
  username:
    description:
      - API user (role admin for topology, operator for volumes, hosts and maintenance).
      - Falls back to E(CAIRN_USERNAME).
    type: str
    required: true
  password:
    description:
      - The user's password. Never logged.
      - Falls back to E(CAIRN_PASSWORD).
    type: str
    required: true
  ca_file:
    description:
      - PEM file with the gateway's certificate or its CA (the gateway writes its self-signed
        C(cert.pem) into its state directory, C(/var/lib/cairn/gateway) on an SVM).
      - Falls back to E(CAIRN_CA_FILE).
    type: path
  validate_certs:
    description:
      - Verify the gateway's TLS certificate. Only turn this off in a lab.
    type: bool
    default: true
  timeout:
    description:
      - Seconds to wait for each API answer.
    type: int
    default: 30
requirements:
  - "The C(cairn) Python package (the gateway API client, C(installer/) in the Cairn repository)
    in the Python that runs the module, usually the controller's (C(delegate_to=localhost)).
    C(scripts/pydeps.sh) installs it into the repository's C(.venv)."
notes:
  - "Modules talk to the REST API only: run them on the controller (C(delegate_to=localhost)
    or C(connection=local)) with C(ansible_python_interpreter) pointing at a Python that has
    the C(cairn) package."
  - Supports C(check_mode) and C(diff) (except M(cairn.storage.info), which only reads).
  - Errors carry the gateway's HTTP C(status), error C(code), C(message) and C(field).
"""
