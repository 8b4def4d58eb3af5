"""Connecting to vCenter: address parsing, TLS policy, clear login errors.

The certificate is verified (system CAs or ``--vcenter-ca-file``), pinned by
its SHA-256 thumbprint (``--vcenter-thumbprint``; checked on the very
connection that is used, by pyVmomi), or - only with ``--insecure`` -
not checked at all, with a warning. The same policy applies to the NFC
uploads of an OVA (they go to vCenter's or the hosts' HTTPS endpoints).
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import ssl
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim
from requests.adapters import HTTPAdapter

from cairn._http import Session

from .errors import Exit, InstallerError


@dataclass(frozen=True)
class TlsPolicy:
    """How a server certificate is checked: CA file, pinned SHA-256 thumbprint, or not at all."""

    ca_file: str | None = None
    thumbprint: str | None = None  # SHA-256, normalized: 64 lowercase hex digits
    insecure: bool = False

    @staticmethod
    def of(ca_file: str | None, thumbprint: str | None, insecure: bool) -> TlsPolicy:
        given = sum(1 for x in (ca_file, thumbprint, insecure) if x)
        if given > 1:
            raise InstallerError(Exit.USAGE, "give only one of --vcenter-ca-file, --vcenter-thumbprint and --insecure")
        return TlsPolicy(ca_file or None, normalize_thumbprint(thumbprint) if thumbprint else None, insecure)

    def ssl_context(self) -> ssl.SSLContext:
        if self.thumbprint:
            pinned = _PinnedContext(ssl.PROTOCOL_TLS_CLIENT)
            pinned.pin = self.thumbprint
            pinned.check_hostname = False
            pinned.verify_mode = ssl.CERT_NONE
            return pinned
        if self.insecure:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            return ctx
        return ssl.create_default_context(cafile=self.ca_file)

    def session(self) -> requests.Session:
        """A requests session that applies this policy (used for NFC uploads)."""
        s = Session()
        if self.thumbprint:
            s.verify = False
            s.mount("https://", _PinnedAdapter(self.thumbprint))
        elif self.insecure:
            s.verify = False
        elif self.ca_file:
            s.verify = self.ca_file
        return s


class PinMismatch(ssl.SSLError):
    """The server's certificate is not the pinned one."""


class _PinnedContext(ssl.SSLContext):
    """Checks the peer certificate's SHA-256 right after every handshake, on
    the connection that is then used (no separate probe a MITM could pass)."""

    pin = ""

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        s = super().wrap_socket(*args, **kwargs)
        der = s.getpeercert(binary_form=True)
        seen = hashlib.sha256(der or b"").hexdigest()
        if seen != self.pin:
            s.close()
            raise PinMismatch(f"certificate SHA-256 {colon_hex(seen)} is not the pinned {colon_hex(self.pin)}")
        return s


class _PinnedAdapter(HTTPAdapter):
    """Checks the peer certificate's SHA-256 on every connection (urllib3 assert_fingerprint)."""

    def __init__(self, sha256_hex: str) -> None:
        self._fp = sha256_hex
        super().__init__()

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **kw: Any) -> None:
        kw["assert_fingerprint"] = self._fp
        super().init_poolmanager(connections, maxsize, block=block, **kw)


def normalize_thumbprint(t: str) -> str:
    """``AB:CD:...`` or ``abcd...`` (SHA-256) -> 64 lowercase hex digits.

    >>> normalize_thumbprint("AB:" * 31 + "AB")[:6]
    'ababab'
    """
    h = t.replace(":", "").replace(" ", "").lower()
    if len(h) != 64 or any(c not in "0123456789abcdef" for c in h):
        raise InstallerError(
            Exit.USAGE,
            f"thumbprint {t!r} is not a SHA-256 thumbprint (64 hex digits, colons allowed); "
            "get it with: openssl s_client -connect VCENTER:443 </dev/null | openssl x509 -noout -fingerprint -sha256",
        )
    return h


def colon_hex(h: str) -> str:
    return ":".join(h[i : i + 2] for i in range(0, len(h), 2)).upper()


def server_sha256(host: str, port: int, timeout: float = 10.0) -> str:
    """The SHA-256 thumbprint of the certificate a TLS server presents (not verified)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, port), timeout=timeout) as raw, ctx.wrap_socket(raw, server_hostname=host) as s:
        der = s.getpeercert(binary_form=True)
    if der is None:
        raise InstallerError(Exit.UNREACHABLE, f"{host}:{port} presented no certificate")
    return hashlib.sha256(der).hexdigest()


@dataclass(frozen=True)
class Target:
    """A vCenter to connect to."""

    host: str
    port: int
    user: str
    password: str
    tls: TlsPolicy

    @staticmethod
    def parse_address(addr: str) -> tuple[str, int]:
        """``vc``, ``vc:443`` or ``https://vc[:port]/sdk`` -> (host, port).

        >>> Target.parse_address("https://127.0.0.1:8989/sdk")
        ('127.0.0.1', 8989)
        >>> Target.parse_address("vc.example.com")
        ('vc.example.com', 443)
        """
        a = addr.strip()
        if not a:
            raise InstallerError(Exit.USAGE, "no vCenter address: give --vcenter HOST (or set CAIRN_VCENTER)")
        u = urlsplit(a if "://" in a else "https://" + a)
        if u.scheme != "https" or not u.hostname:
            raise InstallerError(Exit.USAGE, f"vCenter address {addr!r}: give HOST, HOST:PORT or https://HOST[:PORT]/sdk")
        try:
            port = u.port or 443
        except ValueError as e:
            raise InstallerError(Exit.USAGE, f"vCenter address {addr!r}: {e}") from e
        return u.hostname, port


def warn_insecure(what: str) -> None:
    print(
        f"WARNING: not verifying {what}'s certificate (--insecure): anyone on the network path can pose as it "
        f"and read the password; pin it with --vcenter-thumbprint instead",
        file=sys.stderr,
    )


def connect(t: Target, timeout: float = 60.0) -> Any:
    """Log in; returns the ServiceInstance. Raises InstallerError with what to do next."""
    if t.tls.insecure:
        warn_insecure(f"vCenter {t.host}")
    try:
        si = SmartConnect(
            host=t.host,
            port=t.port,
            user=t.user,
            pwd=t.password,
            sslContext=t.tls.ssl_context(),
            httpConnectionTimeout=timeout,
            disableSslCertValidation=t.tls.insecure,
        )
    except vim.fault.InvalidLogin as e:
        raise InstallerError(
            Exit.AUTH, f"vCenter {t.host}: wrong user name or password for {t.user!r}; check them (--vcenter-user, CAIRN_VCENTER_PASSWORD)"
        ) from e
    except PinMismatch as e:
        raise InstallerError(Exit.TLS, f"vCenter {t.host}: {e.args[0]}: check that you reach the right vCenter (and the thumbprint)") from e
    except ssl.SSLCertVerificationError as e:
        raise InstallerError(
            Exit.TLS,
            f"vCenter {t.host}: certificate not trusted ({e.verify_message}); give its CA with --vcenter-ca-file, "
            f"or pin it with --vcenter-thumbprint {colon_hex(_try_sha256(t))}",
        ) from e
    except (ConnectionError, TimeoutError, socket.gaierror, OSError) as e:
        raise InstallerError(Exit.UNREACHABLE, f"cannot reach vCenter at {t.host}:{t.port} ({e}); check the address and the network") from e
    return si


def _try_sha256(t: Target) -> str:
    try:
        return server_sha256(t.host, t.port)
    except OSError:
        return "<SHA-256>"


def disconnect(si: Any) -> None:
    # Logging out of a dying session is best effort.
    with contextlib.suppress(Exception):
        Disconnect(si)
