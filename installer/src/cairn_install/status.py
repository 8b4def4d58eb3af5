"""What vCenter holds of Cairn: the registration, templates per host, deployed SVMs."""

from __future__ import annotations

from typing import Any

from . import extension
from .upload import all_hosts, vms


def _cairn_vapp(va: Any) -> tuple[bool, str]:
    """(is a Cairn SVM, product version): a VM whose vApp declares cairn.* properties."""
    if va is None:
        return False, ""
    props = [p.id for p in (va.property or [])]
    if not any(p.startswith("cairn.") for p in props):
        return False, ""
    version = next((p.version for p in (va.product or []) if p.version), "")
    return True, version


def collect(si: Any, key: str) -> dict[str, Any]:
    content = si.content
    reg = extension.find(si, key)
    templates: dict[str, list[dict[str, str]]] = {h.name: [] for h in all_hosts(content)}
    svms: list[dict[str, str]] = []
    for v in vms(content):
        ok, version = _cairn_vapp(v.vapp)
        if not ok:
            continue
        if v.template:
            templates.setdefault(v.host, []).append({"name": v.name, "version": version})
        else:
            svms.append({"name": v.name, "host": v.host, "power_state": v.power_state, "version": version})
    for ts in templates.values():
        ts.sort(key=lambda t: t["name"])
    return {
        "registration": reg.as_dict() if reg else None,
        "templates": dict(sorted(templates.items())),
        "svms": sorted(svms, key=lambda s: s["name"]),
        "vcenter": {"version": content.about.version, "name": content.about.fullName},
    }


def render(st: dict[str, Any]) -> str:
    out = [f"vCenter: {st['vcenter']['name']}"]
    r = st["registration"]
    if r:
        out.append(f"Plugin: registered, version {r['version']} ({r['key']})")
        out.append(f"  client  {r['client_type']} {r['client_url']}")
        out.append(f"  server  {r['server_type']} {r['server_url']} thumbprint {r['server_thumbprint']}")
    else:
        out.append("Plugin: not registered (cairn-install register)")
    out.append("Templates per host:")
    for host, ts in st["templates"].items():
        out.append(f"  {host:28s} " + (", ".join(f"{t['name']} (v{t['version'] or '?'})" for t in ts) or "-"))
    out.append(f"Deployed SVMs: {len(st['svms'])}")
    for s in st["svms"]:
        out.append(f"  {s['name']:32s} on {s['host']:24s} {s['power_state']}")
    return "\n".join(out)


__all__ = ["collect", "render"]
