"""The plugin's vCenter extension: read the descriptor the plugin server
publishes (``GET /api/v1/extension``), register it, upgrade it, remove it.

The installer registers exactly what the plugin server describes - it does
not invent fields - so the registration always matches the server that
serves ``plugin.json``. Before registering it checks that the certificate
the plugin server presents is the one its descriptor names: otherwise the
vSphere Client would refuse to load the plugin.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import requests
from pyVmomi import vim

from .errors import Exit, InstallerError
from .vcenter import TlsPolicy, colon_hex, server_sha256

DESCRIPTOR_PATH = "/api/v1/extension"
# Descriptor formats: 1 (server_url .../ui/, type HTTPS, thumbprints only);
# 2 (server_type MANIFEST_SERVER, server_url = plugin.json, PEM certificate).
KNOWN_VERSIONS = frozenset({1, 2})
MAX_DESCRIPTOR = 256 << 10


@dataclass(frozen=True)
class Descriptor:
    """The registration descriptor (``descriptor_version`` 1 or 2, see KNOWN_VERSIONS)."""

    key: str
    version: str
    company: str
    label: str
    summary: str
    client_type: str
    client_url: str
    server_type: str  # HTTPS (descriptor 1) or MANIFEST_SERVER (descriptor 2: server_url is plugin.json)
    server_url: str
    server_thumbprint: str  # as vCenter stores it: colon hex (SHA-256 when the server gives one)
    server_sha256: str  # 64 lowercase hex, "" when the descriptor has none
    server_certificate: str  # PEM, "" when the descriptor has none
    task_types: list[str] = field(default_factory=list)
    # The plugin's privileges (id, label, summary), group "<first part of the id>".
    privileges: list[tuple[str, str, str]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def from_json(doc: Any, source: str) -> Descriptor:
        if not isinstance(doc, dict):
            raise InstallerError(Exit.USAGE, f"{source}: the extension descriptor is not a JSON object")
        version = doc.get("descriptor_version", 1)
        if type(version) is not int or version not in KNOWN_VERSIONS:
            raise InstallerError(
                Exit.USAGE,
                f"{source}: descriptor_version {version!r} is not one this installer knows {sorted(KNOWN_VERSIONS)}: upgrade cairn-install",
            )

        def s(name: str, *alts: str, required: bool = True) -> str:
            for n in (name, *alts):
                v = doc.get(n)
                if isinstance(v, str) and v:
                    return v
            if required:
                raise InstallerError(Exit.USAGE, f"{source}: the extension descriptor has no {name!r}")
            return ""

        sha256 = s("server_thumbprint_sha256", "server_sha256", required=False).replace(":", "").lower()
        thumb = colon_hex(sha256) if sha256 else s("server_thumbprint")
        tasks = doc.get("task_types") or []
        if not isinstance(tasks, list):
            raise InstallerError(Exit.USAGE, f"{source}: the extension descriptor's 'task_types' is not a list")
        privs = doc.get("privileges") or []
        if not isinstance(privs, list):
            raise InstallerError(Exit.USAGE, f"{source}: the extension descriptor's 'privileges' is not a list")
        privileges: list[tuple[str, str, str]] = []
        for p in privs:
            pid = p.get("id") if isinstance(p, dict) else None
            if not isinstance(pid, str) or pid.count(".") < 1 or not pid.split(".", 1)[0] or not pid.split(".", 1)[1]:
                raise InstallerError(Exit.USAGE, f"{source}: privilege {p!r} has no id of the form GROUP.NAME")
            label, summary = p.get("label"), p.get("summary")
            privileges.append((pid, label if isinstance(label, str) else pid, summary if isinstance(summary, str) else ""))
        return Descriptor(
            key=s("key"),
            version=s("plugin_version", "version"),
            company=s("company"),
            label=s("label"),
            summary=s("summary", required=False),
            client_type=s("client_type"),
            client_url=s("client_url"),
            server_type=s("server_type", required=False) or "HTTPS",
            server_url=s("server_url"),
            server_thumbprint=thumb,
            server_sha256=sha256,
            server_certificate=s("server_certificate", "server_certificate_pem", required=False),
            task_types=[str(t) for t in tasks if isinstance(t, str)],
            privileges=privileges,
            raw=dict(doc),
        )

    def extension(self) -> Any:
        """The vim.Extension to register."""
        desc = vim.Description(label=self.label, summary=self.summary or self.label)
        client = vim.Extension.ClientInfo(
            version=self.version, description=desc, company=self.company, type=self.client_type, url=self.client_url
        )
        server = vim.Extension.ServerInfo(
            url=self.server_url,
            description=desc,
            company=self.company,
            type=self.server_type,
            adminEmail=["noreply@cairn.invalid"],
            serverThumbprint=self.server_thumbprint,
        )
        if self.server_certificate:
            server.serverCertificate = self.server_certificate
        return vim.Extension(
            key=self.key,
            version=self.version,
            company=self.company,
            description=desc,
            client=[client],
            server=[server],
            taskList=[vim.Extension.TaskTypeInfo(taskID=t) for t in self.task_types],
            privilegeList=[vim.Extension.PrivilegeInfo(privID=p, privGroupName=p.split(".", 1)[0]) for p, _, _ in self.privileges],
            resourceList=_labels(self.privileges),
            lastHeartbeatTime=datetime.now(UTC),
            shownInSolutionManager=True,
        )


def _labels(privileges: list[tuple[str, str, str]]) -> list[Any]:
    """The vSphere Client role editor's labels of the privileges (module "privilege")."""
    if not privileges:
        return []
    data = []
    for group in sorted({p.split(".", 1)[0] for p, _, _ in privileges}):
        data.append(vim.KeyValue(key=f"{group}.label", value=group))
    for pid, label, summary in privileges:
        data.append(vim.KeyValue(key=f"{pid}.label", value=label))
        data.append(vim.KeyValue(key=f"{pid}.summary", value=summary or label))
    return [vim.Extension.ResourceInfo(locale="en", module="privilege", data=data)]


def fetch_descriptor(plugin_url: str, tls: TlsPolicy, timeout: float = 30.0) -> Descriptor:
    """GET the descriptor from the plugin server and check its certificate matches it."""
    base = plugin_url.rstrip("/")
    u = urlsplit(base if "://" in base else "https://" + base)
    if u.scheme != "https" or not u.hostname:
        raise InstallerError(Exit.USAGE, f"plugin server {plugin_url!r}: give https://HOST:PORT (where cairn-plugin listens)")
    base = f"https://{u.netloc}{u.path}"
    url = base + DESCRIPTOR_PATH
    try:
        with tls.session() as s:
            r = s.get(url, timeout=(10, timeout), stream=True)
            body = r.raw.read(MAX_DESCRIPTOR + 1, decode_content=True)
    except requests.exceptions.SSLError as e:
        raise InstallerError(
            Exit.TLS,
            f"plugin server {base}: certificate not trusted ({e}); pin it with --plugin-thumbprint "
            f"{_sha_hint(u.hostname, u.port or 443)} (the SHA-256 cairn-plugin prints at start), or give --plugin-ca-file",
        ) from e
    except requests.RequestException as e:
        raise InstallerError(Exit.UNREACHABLE, f"cannot reach the plugin server at {base} ({e}); is cairn-plugin running there?") from e
    if r.status_code != 200:
        raise InstallerError(Exit.FAILED, f"plugin server {url} answered HTTP {r.status_code}: {body[:300].decode('utf-8', 'replace')}")
    if len(body) > MAX_DESCRIPTOR:
        raise InstallerError(Exit.FAILED, f"plugin server {url}: descriptor larger than {MAX_DESCRIPTOR} bytes")
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise InstallerError(Exit.FAILED, f"plugin server {url}: the descriptor is not JSON ({e})") from e
    d = Descriptor.from_json(doc, url)
    if d.server_sha256:
        seen = server_sha256(u.hostname, u.port or 443)
        if seen != d.server_sha256:
            raise InstallerError(
                Exit.TLS,
                f"plugin server {base} presents certificate SHA-256 {colon_hex(seen)} but its descriptor names "
                f"{colon_hex(d.server_sha256)}: the vSphere Client would refuse it; restart cairn-plugin after changing its certificate",
            )
    return d


def _sha_hint(host: str, port: int) -> str:
    try:
        return colon_hex(server_sha256(host, port))
    except OSError:
        return "<SHA-256>"


def load_descriptor(path: str) -> Descriptor:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.loads(f.read(MAX_DESCRIPTOR + 1))
    except OSError as e:
        raise InstallerError(Exit.USAGE, f"cannot read the descriptor file {path}: {e.strerror}") from e
    except ValueError as e:
        raise InstallerError(Exit.USAGE, f"descriptor file {path} is not JSON: {e}") from e
    return Descriptor.from_json(doc, path)


@dataclass(frozen=True)
class Registration:
    """What vCenter has registered under the key."""

    key: str
    version: str
    company: str
    label: str
    client_type: str
    client_url: str
    server_type: str
    server_url: str
    server_thumbprint: str
    server_certificate: bool  # a PEM certificate is registered

    def as_dict(self) -> dict[str, str]:
        return dict(self.__dict__)


def find(si: Any, key: str) -> Registration | None:
    ext = si.content.extensionManager.FindExtension(key)
    if ext is None:
        return None
    c = ext.client[0] if ext.client else None
    sv = ext.server[0] if ext.server else None
    return Registration(
        key=ext.key,
        version=ext.version or "",
        company=ext.company or "",
        label=ext.description.label if ext.description else "",
        client_type=c.type if c else "",
        client_url=c.url if c else "",
        server_type=sv.type if sv else "",
        server_url=sv.url if sv else "",
        server_thumbprint=sv.serverThumbprint if sv else "",
        server_certificate=bool(sv is not None and getattr(sv, "serverCertificate", None)),
    )


def register(si: Any, d: Descriptor) -> Registration:
    have = find(si, d.key)
    if have is not None:
        raise InstallerError(
            Exit.EXISTS,
            f"the plugin {d.key} is already registered (version {have.version}, {have.client_url}); "
            "use 'cairn-install upgrade' to replace the registration, or 'unregister' first",
        )
    si.content.extensionManager.RegisterExtension(d.extension())
    return _must_find(si, d.key)


def upgrade(si: Any, d: Descriptor) -> tuple[Registration, Registration]:
    """Replace the registration; returns (before, after)."""
    have = find(si, d.key)
    if have is None:
        raise InstallerError(Exit.NOT_REGISTERED, f"the plugin {d.key} is not registered: use 'cairn-install register'")
    si.content.extensionManager.UpdateExtension(d.extension())
    return have, _must_find(si, d.key)


def unregister(si: Any, key: str) -> Registration | None:
    """Remove the registration; None when there was none (nothing to do)."""
    have = find(si, key)
    if have is None:
        return None
    si.content.extensionManager.UnregisterExtension(key)
    if find(si, key) is not None:
        raise InstallerError(Exit.FAILED, f"vCenter still lists {key} after unregistering it; retry")
    return have


def _must_find(si: Any, key: str) -> Registration:
    r = find(si, key)
    if r is None:
        raise InstallerError(Exit.FAILED, f"vCenter does not list {key} right after registering it; check vCenter's log")
    return r
