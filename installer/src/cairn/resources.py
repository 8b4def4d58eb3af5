"""Resource managers: the same verbs for every collection of the API.

``list(**filters)``, ``get(ref)``, ``create(...)``, ``update(ref, ...)``,
``delete(ref)``; a ``ref`` is an id or a name (the gateway accepts both).
Creates are idempotent: when the answer to a POST is lost (a gateway died
mid-call), the manager looks the name up before trying again, so a retry
never creates a second object and never fails on the first one's success.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from ._http import Response, Transport
from .errors import ApiError, JobFailed, JobTimeout, NotFound, Unavailable, error_from_job
from .models import (
    SDS,
    Alert,
    Bundle,
    Capacity,
    Device,
    Event,
    FaultSet,
    Host,
    Job,
    JoinToken,
    MdmMember,
    Model,
    Pool,
    ProtectionDomain,
    Statistics,
    System,
    SystemInfo,
    Updater,
    User,
    Versions,
    Volume,
)

M = TypeVar("M", bound=Model)


def _ref(ref: str | Model) -> str:
    if isinstance(ref, Model):
        r = ref.raw.get("id") or ref.raw.get("name")
        if not r:
            raise ValueError(f"{type(ref).__name__} has neither id nor name")
        return quote(str(r), safe="")
    if not ref:
        raise ValueError("empty reference: give an id or a name")
    return quote(ref, safe="")


def _etag(r: Response) -> str | None:
    return r.headers.get("ETag")


def _object(r: Response, path: str) -> dict[str, Any]:
    """The answer's JSON object, or ApiError invalid_response."""
    if not isinstance(r.body, dict):
        raise ApiError(r.status, "invalid_response", f"{path}: expected an object")
    return r.body


def _items(r: Response, path: str) -> list[dict[str, Any]]:
    """The objects of the answer's JSON list, or ApiError invalid_response."""
    if not isinstance(r.body, list):
        raise ApiError(r.status, "invalid_response", f"{path}: expected a list")
    return [x for x in r.body if isinstance(x, dict)]


def _must_job(t: Transport, r: Response) -> Job:
    """The Job of a 202 answer: its body, or the object at Location."""
    if isinstance(r.body, dict) and r.body.get("id") and "state" in r.body:
        return Job.from_dict(r.body)
    loc = r.headers.get("Location", "")
    if "/jobs/" in loc:
        j = t.request("GET", "/jobs/" + quote(loc.rsplit("/", 1)[1], safe=""))
        if isinstance(j.body, dict):
            return Job.from_dict(j.body)
    raise ApiError(r.status, "invalid_response", f"expected a job (202 + Location), got HTTP {r.status}")


class Collection(Generic[M]):
    """List, get, create, update and delete one kind of object."""

    path = ""
    model: type[M]
    # A create whose answer was lost is retried only after looking the name up.
    lookup_on_lost_create = True

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def _one(self, r: Response) -> M:
        if not isinstance(r.body, dict):
            raise ApiError(r.status, "invalid_response", f"{self.path}: expected an object, got {type(r.body).__name__}")
        return self.model.from_dict(r.body, _etag(r))

    def list(self, **filters: Any) -> list[M]:
        """All objects, filtered by the API's query parameters (e.g. ``name=``, ``pool=``)."""
        r = self._t.request("GET", self.path, params=filters)
        items = r.body.get("items", r.body) if isinstance(r.body, dict) else r.body
        if not isinstance(items, list):
            raise ApiError(r.status, "invalid_response", f"{self.path}: expected a list")
        return [self.model.from_dict(x) for x in items if isinstance(x, dict)]

    def get(self, ref: str | M) -> M:
        """One object by id or name; raises NotFound."""
        return self._one(self._t.request("GET", f"{self.path}/{_ref(ref)}"))

    def find(self, name: str) -> M | None:
        """The object of that name, or None."""
        try:
            return self.get(name)
        except NotFound:
            return None

    def _create(self, body: dict[str, Any]) -> M:
        name = body.get("name")
        try:
            return self._one(self._t.request("POST", self.path, json_body=body))
        except Unavailable:
            # The POST may or may not have been applied: look before retrying.
            if not name or not self.lookup_on_lost_create:
                raise
            have = self.find(str(name))
            if have is not None:
                return have
            return self._one(self._t.request("POST", self.path, json_body=body))

    def create(self, name: str, **fields: Any) -> M:
        """Create an object; a repeat with the same settings answers the existing one."""
        return self._create({"name": name, **{k: v for k, v in fields.items() if v is not None}})

    def update(self, ref: str | M, *, if_match: str | None = None, **fields: Any) -> M:
        """PATCH fields (e.g. ``name=`` to rename). With ``if_match`` (an ETag from get) a
        concurrent change raises Conflict instead of being overwritten; such a PATCH is retried
        on failover, one without is not."""
        if if_match is None and isinstance(ref, Model):
            if_match = ref.etag
        r = self._t.request("PATCH", f"{self.path}/{_ref(ref)}", json_body=fields, if_match=if_match)
        return self._one(r)

    def delete(self, ref: str | M, *, if_match: str | None = None, missing_ok: bool = False) -> None:
        """Delete. NotFound when it does not exist, unless ``missing_ok``; a delete repeated
        after a lost answer that finds the object gone is a success."""
        try:
            self._t.request("DELETE", f"{self.path}/{_ref(ref)}", if_match=if_match)
        except NotFound:
            if not missing_ok:
                raise


class ProtectionDomains(Collection[ProtectionDomain]):
    """``client.protection_domains``: ``create("pd1")``, ``list()``, ``update("pd1", name="pd-a")``."""

    path = "/protection-domains"
    model = ProtectionDomain

    def create(self, name: str, **fields: Any) -> ProtectionDomain:
        """Create a protection domain (a repeat answers the existing one)."""
        return super().create(name, **fields)


class FaultSets(Collection[FaultSet]):
    """``client.fault_sets.create("rack1", protection_domain="pd1")``; maintenance of a whole fault set."""

    path = "/fault-sets"
    model = FaultSet

    def create(self, name: str, *, protection_domain: str | None = None, **fields: Any) -> FaultSet:
        return super().create(name, protection_domain=protection_domain, **fields)

    def enter_maintenance(self, ref: str | FaultSet, mode: str = "instant") -> list[SDS]:
        """Every SDS of the fault set into maintenance (``instant`` or ``protected``); returns them."""
        r = self._t.request("POST", f"{self.path}/{_ref(ref)}/maintenance", json_body={"mode": mode})
        return [SDS.from_dict(x) for x in (r.body or []) if isinstance(x, dict)]

    def exit_maintenance(self, ref: str | FaultSet) -> list[SDS]:
        r = self._t.request("DELETE", f"{self.path}/{_ref(ref)}/maintenance")
        return [SDS.from_dict(x) for x in (r.body or []) if isinstance(x, dict)]


class SDSs(Collection[SDS]):
    """``client.sds``: ``create("sds1", protection_domain="pd1", address="10.0.0.5:7070")``,
    ``enter_maintenance("sds1")``, ``remove("sds1")`` (drains its data first: a Job)."""

    path = "/sds"
    model = SDS

    def create(
        self, name: str, *, protection_domain: str | None = None, address: str | None = None, fault_set: str | None = None, **fields: Any
    ) -> SDS:
        return super().create(name, protection_domain=protection_domain, address=address, fault_set=fault_set, **fields)

    def enter_maintenance(self, ref: str | SDS, mode: str = "instant", *, if_match: str | None = None) -> SDS:
        """Put an SDS into maintenance: ``instant`` (writes logged, resynced on exit) or ``protected``
        (its data copied elsewhere first). Entering the mode it is already in answers the SDS."""
        r = self._t.request("POST", f"{self.path}/{_ref(ref)}/maintenance", json_body={"mode": mode}, if_match=if_match)
        return self._one(r)

    def exit_maintenance(self, ref: str | SDS, *, if_match: str | None = None) -> SDS:
        return self._one(self._t.request("DELETE", f"{self.path}/{_ref(ref)}/maintenance", if_match=if_match))

    def remove(self, ref: str | SDS) -> Job:
        """Drain the SDS's data to the others, then delete it; returns the ``sds-remove`` job."""
        return _must_job(self._t, self._t.request("POST", f"{self.path}/{_ref(ref)}/remove", json_body={}))


class Devices(Collection[Device]):
    """``client.devices.create(sds="sds1", pool="pool1", path="/dev/disk/by-id/...")``; ``remove()`` drains first."""

    path = "/devices"
    model = Device

    def create(  # type: ignore[override]
        self,
        name: str | None = None,
        *,
        sds: str,
        pool: str,
        path: str,
        force: bool = False,
        timeout: float = 3600.0,
        progress: Callable[[Job], None] | None = None,
        **fields: Any,
    ) -> Device:
        """Add a device and wait until it is ready. ``name`` defaults to ``<sds>-<base name of path>``.

        The gateway checks the request at once (a bad path, an unknown SDS or pool, a taken
        name raise here as usual) and answers with a ``device-add`` job while the SDS prepares
        the device (seconds to minutes on a large disk); ``progress(job)`` sees it. A refusal
        by the SDS (a disk in use, another cluster's data) raises the same ApiError subclass a
        synchronous refusal would (InUse, Invalid, ...), with the job's message. A repeat of a
        device already added returns it; a repeat while its job runs follows that job, so the
        call is safe to retry. JobTimeout when it is not done within ``timeout`` seconds.
        """
        body: dict[str, Any] = {"sds": sds, "pool": pool, "path": path, **fields}
        if name:
            body["name"] = name
        if force:
            body["force"] = True
        try:
            r = self._t.request("POST", self.path, json_body=body)
        except Unavailable:
            # The answer was lost: the gateway finds its own job (or device) for a repeat.
            r = self._t.request("POST", self.path, json_body=body)
        if r.status != 202:
            return self._one(r)  # a repeat: the device
        job = _must_job(self._t, r)
        done = Jobs(self._t).wait(job, timeout=timeout, progress=progress, raise_on_failure=False)
        if done.state == "failed":
            raise error_from_job(done)
        if done.object is None or not done.object.id:
            raise ApiError(r.status, "invalid_response", f"job {done.id} succeeded without naming its device")
        return self.get(done.object.id)

    def remove(self, ref: str | Device) -> Job:
        """Drain the device's data to the pool's others, then delete it; returns the ``device-remove`` job."""
        return _must_job(self._t, self._t.request("POST", f"{self.path}/{_ref(ref)}/remove", json_body={}))


class Pools(Collection[Pool]):
    """``client.pools.create("pool1", protection_domain="pd1")``; ``client.pools.get("pool1").capacity.free``."""

    path = "/pools"
    model = Pool

    def create(self, name: str, *, protection_domain: str | None = None, **fields: Any) -> Pool:
        return super().create(name, protection_domain=protection_domain, **fields)


class Volumes(Collection[Volume]):
    """Volumes::

    v = client.volumes.create("db1", pool="pool1", size=16 * GiB)
    v = client.volumes.resize(v, 32 * GiB)
    client.volumes.map(v, host="esx1")
    client.volumes.unmap(v, host="esx1")
    client.volumes.delete(v)
    """

    path = "/volumes"
    model = Volume

    def create(self, name: str, *, pool: str | None = None, size: int | None = None, thin: bool | None = None, **fields: Any) -> Volume:
        """Create a volume of ``size`` bytes (a multiple of 8 GiB) in ``pool``; a repeat with the same
        settings answers the existing volume."""
        return super().create(name, pool=pool, size=size, thin=thin, **fields)

    def resize(self, ref: str | Volume, size: int, *, if_match: str | None = None) -> Volume:
        """Grow to ``size`` bytes; the current size answers the volume unchanged; smaller is Invalid."""
        return self.update(ref, size=size, if_match=if_match)

    def map(self, ref: str | Volume, host: str, *, read_only: bool = False, if_match: str | None = None, **limits: Any) -> Volume:
        """Map to a host (id or name); mapping again the same way changes nothing.

        ``limits``: per-mapping ``iops_limit`` / ``bandwidth_limit``."""
        body: dict[str, Any] = {"host": host, **limits}
        if read_only:
            body["read_only"] = True
        return self._one(self._t.request("POST", f"{self.path}/{_ref(ref)}/map", json_body=body, if_match=if_match))

    def unmap(self, ref: str | Volume, host: str, *, if_match: str | None = None) -> Volume:
        """Unmap from a host; unmapping from a host it is not mapped to changes nothing."""
        return self._one(self._t.request("POST", f"{self.path}/{_ref(ref)}/unmap", json_body={"host": host}, if_match=if_match))


class Hosts(Collection[Host]):
    """``client.hosts.create("esx1", type="iscsi", iqn="iqn.1998-01.com.vmware:esx1")``."""

    path = "/hosts"
    model = Host

    def create(self, name: str, *, type: str | None = None, iqn: str | None = None, **fields: Any) -> Host:
        return super().create(name, type=type, iqn=iqn, **fields)


class Users(Collection[User]):
    """``client.users.create("ops", role="operator", password=...)`` (admin only).

    A taken name is always AlreadyExists (a password cannot be compared), so
    a create whose answer was lost is not retried: check with ``find``."""

    path = "/users"
    model = User
    lookup_on_lost_create = False

    def create(self, name: str, *, role: str | None = None, password: str | None = None, **fields: Any) -> User:
        return super().create(name, role=role, password=password, **fields)


class MdmMembers(Collection[MdmMember]):
    """MDM (etcd) members: ``client.mdm.list()``, ``add(name, peer_url)`` (its answer's
    ``initial_cluster`` is what to start the new member with), ``delete(name)``,
    ``set_leader(name)``."""

    path = "/mdm/members"
    model = MdmMember

    def add(self, name: str, peer_url: str, *, tie_breaker: bool = False) -> MdmMember:
        """Add a member (as an etcd learner, promoted once in sync); a repeat answers it."""
        return self._create({"name": name, "peer_url": peer_url, "tie_breaker": tie_breaker})

    def set_leader(self, name: str) -> str:
        """Move the MDM leadership to ``name``, both etcd's raft leader and the Cairn control loop
        (``cairn_leader``); returns the new leader once it holds both. Raises ``cairn.Unavailable``
        when the member does not campaign (down, starting) or did not take over within 15 s."""
        r = self._t.request("POST", "/mdm/leader", json_body={"name": name})
        return str(r.body.get("leader", "")) if isinstance(r.body, dict) else ""


class Jobs(Collection[Job]):
    """Long operations: ``job = client.jobs.wait(job_id, progress=print)``."""

    path = "/jobs"
    model = Job

    def wait(
        self,
        job: str | Job,
        *,
        timeout: float = 3600.0,
        poll: float = 1.0,
        progress: Callable[[Job], None] | None = None,
        raise_on_failure: bool = True,
    ) -> Job:
        """Poll until the job ends; ``progress(job)`` is called whenever percent/state/message change.

        Raises JobFailed (state failed) or JobTimeout (still running after ``timeout``)::

            job = client.sds.delete("sds4")          # drains first: a job
            client.jobs.wait(job, progress=lambda j: print(f"{j.percent:.0f}% {j.message}"))
        """
        job_id = job.id if isinstance(job, Job) else job
        deadline = time.monotonic() + timeout
        last: tuple[Any, ...] | None = None
        # Start fast and double up to ``poll``: a job of a moment is seen done at once.
        step = min(0.05, poll)
        while True:
            j = self.get(job_id)
            key = (j.state, j.percent, j.message)
            if progress is not None and key != last:
                progress(j)
            last = key
            if j.done:
                if j.state == "failed" and raise_on_failure:
                    raise JobFailed(j)
                return j
            if time.monotonic() >= deadline:
                raise JobTimeout(j, timeout)
            time.sleep(min(step, max(0.0, deadline - time.monotonic())))
            step = min(2 * step, poll)


class Events:
    """Events and the audit log::

    for e in client.events.list(severity="warning", limit=50):
        print(e.time, e.kind, e.message)
    for e in client.events.stream(after=last_id):   # follows live (SSE)
        ...
    """

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def list(
        self,
        *,
        after: str | None = None,
        severity: str | None = None,
        object: str | None = None,
        kind: str | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        """Events oldest first, after the event id ``after``; ``severity`` means at least that severity."""
        params = {"after": after, "severity": severity, "object": object, "kind": kind, "limit": limit}
        r = self._t.request("GET", "/events", params=params)
        items = r.body.get("items", []) if isinstance(r.body, dict) else r.body or []
        return [Event.from_dict(x) for x in items if isinstance(x, dict)]

    def stream(self, *, after: str | None = None, **filters: Any) -> Generator[Event, None, None]:
        """Follow events as they happen (``GET /events/stream``), reconnecting from the last
        id seen when a gateway goes away; stop by breaking out of the loop."""
        last = after
        while True:
            params = {"after": last, **filters}
            try:
                for e in self._t.stream_sse("/events/stream", params=params):
                    ev = Event.from_dict(e)
                    last = ev.id or last
                    yield ev
            except Unavailable:
                time.sleep(1.0)


class Alerts:
    """``client.alerts.list(active=True)``: ongoing conditions (and recently cleared ones)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def list(self, *, severity: str | None = None, object: str | None = None, active: bool | None = None) -> list[Alert]:
        """Alerts newest first; ``active=True``: only those not cleared."""
        params = {"severity": severity, "object": object, "active": None if active is None else str(active).lower()}
        r = self._t.request("GET", "/alerts", params=params)
        items = r.body.get("items", []) if isinstance(r.body, dict) else r.body or []
        return [Alert.from_dict(x) for x in items if isinstance(x, dict)]


class StatisticsApi:
    """``client.statistics.get()`` (system) or ``.get("volumes", "db1")``."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def get(self, kind: str | None = None, ref: str | None = None) -> Statistics:
        path = "/statistics" if kind is None else f"/statistics/{quote(kind, safe='')}/{_ref(ref or '')}"
        r = self._t.request("GET", path)
        return Statistics.from_dict(_object(r, path))


class JoinTokens:
    """``client.join_tokens``: tokens a new node spends for its certificate (``cairn pki join``)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def create(self, roles: list[str], *, ttl_seconds: int | None = None) -> JoinToken:
        """A new token for ``roles``; its ``token`` is shown only here (a secret: do not log it)."""
        body: dict[str, Any] = {"roles": roles}
        if ttl_seconds is not None:
            body["ttl_seconds"] = ttl_seconds
        r = self._t.request("POST", "/system/join-tokens", json_body=body)
        return JoinToken.from_dict(_object(r, "/system/join-tokens"))

    def list(self) -> list[JoinToken]:
        """The tokens not yet spent or revoked, without their secrets."""
        r = self._t.request("GET", "/system/join-tokens")
        return [JoinToken.from_dict(x) for x in _items(r, "/system/join-tokens")]

    def revoke(self, token_id: str) -> None:
        """Revoke a token: no node can spend it any more (NotFound when spent or revoked)."""
        self._t.request("DELETE", f"/system/join-tokens/{token_id}")


class SystemApi:
    """``client.system.get()``, ``client.system.capacity()``, ``client.system.bootstrap("prod")``."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def get(self) -> System:
        r = self._t.request("GET", "/system")
        return System.from_dict(_object(r, "/system"), _etag(r))

    def capacity(self) -> Capacity:
        """The system's capacity (bytes): raw, usable, spare_reserved, allocated, free, ..."""
        s = self.get()
        if s.capacity is None:
            raise ApiError(200, "invalid_response", "the gateway's /system has no capacity; is it older than this client?")
        return s.capacity

    def versions(self) -> Versions:
        """The Cairn version each running daemon runs; ``mixed`` while more than one does."""
        r = self._t.request("GET", "/system/versions")
        return Versions.from_dict(_object(r, "/system/versions"))

    def bootstrap(self, name: str) -> SystemInfo:
        """Create the system once; repeating with the same name answers it, another name is AlreadyExists."""
        try:
            r = self._t.request("POST", "/system/bootstrap", json_body={"name": name})
        except Unavailable:
            s = self.get()
            if s.system is not None and s.system.name == name:
                return s.system
            raise
        return SystemInfo.from_dict(_object(r, "/system/bootstrap"))


class Upgrades:
    """``client.upgrades``: the gateway's part of an upgrade (docs/api.md, "Upgrade").

    Store a bundle (the file ``cairn bundle --bin DIR --out FILE`` wrote), see
    each SVM's updater, order one SVM to a stored version. Rolling a whole
    system (one fault set at a time in instant maintenance, the MDM members
    last) is the vSphere plugin's job (``POST /api/v1/systems/{system}/upgrade``
    there), or ``cairnctl upgrade``."""

    MAX_BUNDLE = 256 << 20  # the gateway's bound on a bundle

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def bundles(self) -> list[Bundle]:
        """The stored bundles, by version."""
        r = self._t.request("GET", "/upgrade/bundles")
        return [Bundle.from_dict(x) for x in _items(r, "/upgrade/bundles")]

    def upload(self, bundle: str | os.PathLike[str] | bytes) -> Bundle:
        """Store a bundle, given as its file's path or its bytes; the gateway checks it first.

        A file over 256 MiB is refused here (ValueError) before a byte is sent; one the gateway
        refuses raises cairn.Invalid with its reason. Storing the same version again replaces it."""
        if isinstance(bundle, bytes):
            what, size = "the bundle", len(bundle)
        else:
            what, size = str(bundle), Path(bundle).stat().st_size
        if size > self.MAX_BUNDLE:
            raise ValueError(
                f"{what} is {size >> 20} MiB: the gateway takes update bundles up to {self.MAX_BUNDLE >> 20} MiB; "
                "give the file `cairn bundle --bin DIR --out FILE` wrote"
            )
        data = bundle if isinstance(bundle, bytes) else Path(bundle).read_bytes()
        r = self._t.request("POST", "/upgrade/bundles", data=data, content_type="application/gzip")
        return Bundle.from_dict(_object(r, "/upgrade/bundles"))

    def svms(self) -> list[Updater]:
        """Each SVM's updater that has reported, by name."""
        r = self._t.request("GET", "/upgrade/svms")
        return [Updater.from_dict(x) for x in _items(r, "/upgrade/svms")]

    def order(self, svm: str, version: str) -> Updater:
        """Order SVM ``svm`` (its name as :meth:`svms` lists it) to run a stored version.

        Answers the updater as it was when ordered; the order is carried out once its state is
        final and ``updated`` differs. NotFound for a version not stored or an SVM never heard
        of; Conflict while the SVM carries out an earlier order."""
        r = self._t.request("POST", f"/upgrade/svms/{_ref(svm)}", json_body={"version": version})
        return Updater.from_dict(_object(r, "/upgrade/svms"))


__all__ = [
    "Alerts",
    "JoinTokens",
    "Collection",
    "Devices",
    "Events",
    "FaultSets",
    "Hosts",
    "Jobs",
    "MdmMembers",
    "Pools",
    "ProtectionDomains",
    "SDSs",
    "StatisticsApi",
    "SystemApi",
    "Upgrades",
    "Users",
    "Volumes",
]
