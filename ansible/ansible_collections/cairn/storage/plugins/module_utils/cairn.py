# -*- coding: utf-8 -*-
# Copyright: Cairn developers
# Apache License 2.0 (see LICENSE at the root of the repository)
"""Shared code of the cairn.storage modules: connection arguments, the API client,
error conversion and the present/absent reconciliation every module follows.

Invariants the modules rely on:
  * nothing is written in check mode: every write goes through CairnModule.write(),
    which returns the object as it would be instead of calling the API;
  * changed is True only when at least one write was (or in check mode, would be) sent;
  * an API error fails the module with the gateway's status, code, message and field.
"""

from __future__ import annotations

import traceback
from typing import Any, Callable

from ansible.module_utils.basic import AnsibleModule, env_fallback, missing_required_lib

CAIRN_IMPORT_ERROR: str | None
try:
    import cairn
    from cairn import ApiError, CairnError, NotFound
except ImportError:
    CAIRN_IMPORT_ERROR = traceback.format_exc()
    cairn = None  # type: ignore[assignment]
    # Stand-ins for the except clauses below; CairnModule fails before any call without cairn.
    ApiError = CairnError = NotFound = Exception  # type: ignore[misc,assignment]
else:
    CAIRN_IMPORT_ERROR = None

GiB = 1 << 30


def connection_argument_spec() -> dict[str, Any]:
    """The options every module takes to reach the gateway (doc fragment cairn.storage.cairn)."""
    return dict(
        gateways=dict(type="list", elements="str", required=True, fallback=(env_fallback, ["CAIRN_GATEWAYS"])),
        username=dict(type="str", required=True, fallback=(env_fallback, ["CAIRN_USERNAME"])),
        password=dict(type="str", required=True, no_log=True, fallback=(env_fallback, ["CAIRN_PASSWORD"])),
        ca_file=dict(type="path", fallback=(env_fallback, ["CAIRN_CA_FILE"])),
        validate_certs=dict(type="bool", default=True),
        timeout=dict(type="int", default=30),
    )


def split_gateways(values: list[str]) -> list[str]:
    """E(CAIRN_GATEWAYS) arrives as one comma-separated string; a list may hold such strings too."""
    out: list[str] = []
    for v in values:
        out.extend(g.strip() for g in str(v).split(",") if g.strip())
    return out


class CairnModule:
    """An AnsibleModule with a logged-in Cairn client and the reconciliation helpers."""

    def __init__(self, argument_spec: dict[str, Any], **kwargs: Any) -> None:
        spec = connection_argument_spec()
        spec.update(argument_spec)
        kwargs.setdefault("supports_check_mode", True)
        self.module = AnsibleModule(argument_spec=spec, **kwargs)
        self.params: dict[str, Any] = self.module.params
        self.check_mode: bool = self.module.check_mode
        self.changed = False
        self.diff: dict[str, Any] = {"before": {}, "after": {}}
        if CAIRN_IMPORT_ERROR is not None:
            self.module.fail_json(
                msg=missing_required_lib("cairn (the Cairn API client, installer/ in the Cairn repository)"), exception=CAIRN_IMPORT_ERROR
            )
        p = self.params
        self.client = cairn.Client(
            split_gateways(p["gateways"]),
            p["username"],
            p["password"],
            ca_file=p["ca_file"],
            verify=p["validate_certs"],
            timeout=float(p["timeout"]),
        )

    # ---- errors -------------------------------------------------------------------------

    def fail_api(self, err: Exception, doing: str) -> None:
        """Fail with what the gateway said (status, code, message, field)."""
        if isinstance(err, ApiError) and cairn is not None:
            field = f" (field {err.field})" if err.field else ""
            self.module.fail_json(
                msg=f"{doing}: {err.message}{field}",
                status=err.status,
                code=err.code,
                field=err.field,
                api_message=err.message,
            )
        self.module.fail_json(msg=f"{doing}: {err}", exception=traceback.format_exc())

    def call(self, doing: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run one client call; an error fails the module, naming what was being done."""
        try:
            return fn(*args, **kwargs)
        except (ApiError, CairnError) as e:
            self.fail_api(e, doing)
        return None  # not reached: fail_json exits

    def find(self, collection: Any, ref: str, kind: str) -> dict[str, Any] | None:
        """The object's JSON as the gateway shows it, or None when there is none."""
        try:
            return dict(collection.get(ref).raw)
        except NotFound:
            return None
        except (ApiError, CairnError) as e:
            self.fail_api(e, f"read {kind} {ref}")
        return None

    # ---- writes ---------------------------------------------------------------------------

    def write(self, would_be: dict[str, Any] | None, fn: Callable[..., Any], *args: Any, doing: str, **kwargs: Any) -> Any:
        """Send one change (marks changed). In check mode nothing is sent and would_be is returned."""
        self.changed = True
        if self.check_mode:
            return would_be
        result = self.call(doing, fn, *args, **kwargs)
        raw = getattr(result, "raw", None)
        return dict(raw) if raw is not None else result

    def set_diff(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        self.diff = {"before": before or {}, "after": after or {}}

    def exit(self, **result: Any) -> None:
        self.client.close()
        out: dict[str, Any] = dict(changed=self.changed, **result)
        if self.module._diff:
            out["diff"] = self.diff
        self.module.exit_json(**out)


def differences(current: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """The wanted fields (those not None) whose value differs from the current object."""
    return {k: v for k, v in wanted.items() if v is not None and current.get(k) != v}


def compare_view(obj: dict[str, Any] | None, keys: list[str]) -> dict[str, Any]:
    """The fields a module manages, for diff output (stable and small)."""
    if not obj:
        return {}
    return {k: obj.get(k) for k in keys if k in obj}


def parse_size(value: Any) -> int | None:
    """A size in bytes from an int (bytes) or a string with a unit: '8GiB', '1 TiB', '512MiB', '10GB'."""
    if value is None:
        return None
    if isinstance(value, int):
        return value
    s = str(value).strip().replace(" ", "")
    units = {
        "": 1,
        "B": 1,
        "KIB": 1 << 10,
        "MIB": 1 << 20,
        "GIB": 1 << 30,
        "TIB": 1 << 40,
        "K": 1 << 10,
        "M": 1 << 20,
        "G": 1 << 30,
        "T": 1 << 40,
        "KB": 10**3,
        "MB": 10**6,
        "GB": 10**9,
        "TB": 10**12,
    }
    num = s.rstrip("BbIiKkMmGgTt")
    unit = s[len(num) :].upper()
    if unit not in units or not num:
        raise ValueError(f"size {value!r}: give bytes or a number with a unit (GiB, TiB, MiB, GB, TB), e.g. 8GiB")
    try:
        n = float(num)
    except ValueError:
        raise ValueError(f"size {value!r}: {num!r} is not a number") from None
    b = n * units[unit]
    if b != int(b) or b < 0:
        raise ValueError(f"size {value!r} is not a whole number of bytes")
    return int(b)
