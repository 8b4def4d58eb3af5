"""Deploy from a plan file: the JSON the wizard's review step downloads.

The plan is validated by the plugin server against vCenter's inventory
(``POST /api/v1/plan/validate``) and, when valid, started there
(``POST /api/v1/deploy``): the plugin server's deploy engine does the work,
exactly as when the wizard starts it. The installer logs in to the plugin
server with a clone ticket of its own vCenter session (the password is not
sent again) and follows the job and its progress events.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from typing import Any

import requests

from cairn._http import parse_sse
from cairn.errors import ApiError

from .errors import Exit, InstallerError
from .vcenter import TlsPolicy

MAX_PLAN = 1 << 20
MAX_EVENT_LINE = 64 << 10


def load_plan(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_PLAN + 1)
    except OSError as e:
        raise InstallerError(Exit.USAGE, f"cannot read the plan {path}: {e.strerror}") from e
    if len(data) > MAX_PLAN:
        raise InstallerError(Exit.USAGE, f"plan {path} is larger than {MAX_PLAN} bytes: is it the wizard's plan JSON?")
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise InstallerError(Exit.USAGE, f"plan {path} is not JSON ({e}): download it again from the wizard's review step") from e
    if not isinstance(doc, dict) or not doc.get("system"):
        raise InstallerError(Exit.USAGE, f'plan {path} has no "system": it is not a Cairn deployment plan')
    return doc


class PluginSession:
    """A logged-in session with the plugin server."""

    def __init__(self, url: str, tls: TlsPolicy, timeout: float = 60.0) -> None:
        self.base = url.rstrip("/")
        if not self.base.startswith("https://"):
            self.base = "https://" + self.base.split("://", 1)[-1]
        self.http = tls.session()
        self.timeout = (10.0, timeout)

    def call(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200,)) -> Any:
        try:
            r = self.http.request(method, self.base + path, json=body, timeout=self.timeout)
        except requests.exceptions.SSLError as e:
            raise InstallerError(Exit.TLS, f"plugin server {self.base}: certificate not trusted ({e}); use --plugin-thumbprint") from e
        except requests.RequestException as e:
            raise InstallerError(Exit.UNREACHABLE, f"cannot reach the plugin server at {self.base} ({e}); is cairn-plugin running?") from e
        if r.status_code not in ok:
            try:
                msg = r.json().get("error") or r.json().get("message") or r.text
            except ValueError:
                msg = r.text
            code = {401: Exit.AUTH, 400: Exit.USAGE}.get(r.status_code, Exit.FAILED)
            raise InstallerError(code, f"plugin server: {method} {path}: HTTP {r.status_code}: {str(msg)[:500]}")
        return r.json() if r.content else None

    def login(self, user: str, password: str) -> None:
        """Sign in to the plugin server with the vCenter credentials (it opens its own
        vCenter session with them; over the verified TLS connection only)."""
        self.call("POST", "/api/v1/session", {"username": user, "password": password})

    def close(self) -> None:
        with contextlib.suppress(requests.RequestException):
            self.http.delete(self.base + "/api/v1/session", timeout=self.timeout)
        self.http.close()


def validate(ps: PluginSession, plan: dict[str, Any]) -> None:
    v = ps.call("POST", "/api/v1/plan/validate", plan)
    if not v.get("valid"):
        probs = v.get("problems") or []
        lines = [f"{p.get('field', '')}: {p.get('message', p)}" if isinstance(p, dict) else str(p) for p in probs[:30]]
        raise InstallerError(
            Exit.USAGE, "the plan is not valid for this vCenter:\n  " + "\n  ".join(lines) + "\nfix it in the wizard and download it again"
        )


def start(ps: PluginSession, plan: dict[str, Any]) -> dict[str, Any]:
    j = ps.call("POST", "/api/v1/deploy", plan, ok=(202,))
    if not isinstance(j, dict) or not j.get("name"):
        raise InstallerError(Exit.FAILED, "the plugin server accepted the deployment but named no job")
    return j


def follow(ps: PluginSession, job: str, timeout: float, out: Any = sys.stderr) -> dict[str, Any]:
    """Print the job's progress events until it ends; returns the final job."""
    stop = threading.Event()
    t = threading.Thread(target=_events, args=(ps, job, stop, out), daemon=True, name="deploy-events")
    t.start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            jobs = ps.call("GET", "/api/v1/jobs") or []
            j = next((x for x in jobs if isinstance(x, dict) and x.get("name") == job), None)
            if j is None:
                raise InstallerError(Exit.FAILED, f"the plugin server no longer lists job {job} (restarted?); check the vSphere Client")
            if j.get("state") != "running":
                time.sleep(0.5)  # let the last events print
                return dict(j)
            if time.monotonic() > deadline:
                raise InstallerError(Exit.FAILED, f"job {job} still runs after {timeout:.0f} s; it goes on: watch it in the vSphere Client")
            time.sleep(1.0)
    finally:
        stop.set()


def _events(ps: PluginSession, job: str, stop: threading.Event, out: Any) -> None:
    # Progress display only: a broken stream never fails the deployment.
    try:
        with ps.http.get(ps.base + "/api/v1/events", params={"job": job}, stream=True, timeout=(10, 30)) as r:
            for e in parse_sse(r.iter_content(4096), max_line=MAX_EVENT_LINE):
                if stop.is_set():
                    return
                host = f" {e.get('host')}" if e.get("host") else ""
                out.write(f"[{e.get('step', '')}{host}] {e.get('message', '')}\n")
                out.flush()
    except (requests.RequestException, ApiError):
        return
