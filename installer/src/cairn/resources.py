"""Resource managers: the same verbs for every collection of the API.

``list(**filters)``, ``get(ref)``, ``create(...)``, ``update(ref, ...)``,
``delete(ref)``; a ``ref`` is an id or a name (the gateway accepts both).
Creates are idempotent: when the answer to a POST is lost (a gateway died
mid-call), the manager looks the name up before trying again, so a retry
never creates a second object and never fails on the first one's success.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from ._http import Response, Transport
from .errors import ApiError, JobFailed, JobTimeout, NotFound, Unavailable
from .models import (
    SDS,
    Alert,
    Device,
    Event,
    FaultSet,
    Host,
    Job,
    MdmMember,
    Model,
    Pool,
    ProtectionDomain,
    Statistics,
    System,
    User,
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


def _accepted_job(t: Transport, r: Response) -> Job | None:
    """The Job of a 202 answer (its body, or the object at Location); None for a finished call."""
    if r.status != 202:
        return None
    if isinstance(r.body, dict) and r.body.get("id") and "state" in r.body:
        return Job.from_dict(r.body)
    loc = r.headers.get("Location", "")
    if "/jobs/" in loc:
        j = t.request("GET", "/jobs/" + quote(loc.rsplit("/", 1)[1], safe=""))
        if isinstance(j.body, dict):
            return Job.from_dict(j.body)
    raise ApiError(202, "invalid_response", "the gateway accepted a job but named none (no Location)")


class Collection(Generic[M]):
    """List, get, create, update and delete one kind of object."""

    path = ""
    model: type[M]

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
            if not name:
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

    def delete(self, ref: str | M) -> Job | None:
        """Delete; returns the Job when the gateway runs it as one (202), else None.

        A delete repeated after a lost answer that finds the object gone is a success."""
        r = self._t.request("DELETE", f"{self.path}/{_ref(ref)}")
        return _accepted_job(self._t, r)


class ProtectionDomains(Collection[ProtectionDomain]):
    """``client.protection_domains``: ``create("pd1")``, ``list()``, ``update("pd1", name="pd-a")``."""

    path = "/protection-domains"
    model = ProtectionDomain


class FaultSets(Collection[FaultSet]):
    """``client.fault_sets.create("rack1", protection_domain="pd1")``."""

    path = "/fault-sets"
    model = FaultSet

    def create(self, name: str, **fields: Any) -> FaultSet:
        return super().create(name, **fields)

    def enter_maintenance(self, ref: str | FaultSet) -> Job | None:
        r = self._t.request("POST", f"{self.path}/{_ref(ref)}/maintenance")
        return _accepted_job(self._t, r)

    def exit_maintenance(self, ref: str | FaultSet) -> Job | None:
        r = self._t.request("DELETE", f"{self.path}/{_ref(ref)}/maintenance")
        return _accepted_job(self._t, r)


class SDSs(Collection[SDS]):
    """``client.sds``: ``create("sds1", protection_domain="pd1", address="10.0.0.5:7100")``,
    ``enter_maintenance("sds1")``, ``remove("sds1")`` (drains its data first, as a job)."""

    path = "/sds"
    model = SDS

    def enter_maintenance(self, ref: str | SDS) -> SDS:
        """Put an SDS into maintenance (its copies move to no other SDS; writes are logged)."""
        r = self._t.request("POST", f"{self.path}/{_ref(ref)}/maintenance")
        return self._one(r) if isinstance(r.body, dict) and "name" in r.body else self.get(ref)

    def exit_maintenance(self, ref: str | SDS) -> SDS:
        r = self._t.request("DELETE", f"{self.path}/{_ref(ref)}/maintenance")
        return self._one(r) if isinstance(r.body, dict) and "name" in r.body else self.get(ref)


class Devices(Collection[Device]):
    """``client.devices.create("sds1-nvme0", sds="sds1", pool="pool1", path="/dev/disk/by-id/...")``."""

    path = "/devices"
    model = Device


class Pools(Collection[Pool]):
    """``client.pools.create("pool1", protection_domain="pd1")``; ``pool.capacity.free``."""

    path = "/pools"
    model = Pool


class Volumes(Collection[Volume]):
    """Volumes::

    v = client.volumes.create("db1", pool="pool1", size=16 * GiB)
    client.volumes.resize(v, 32 * GiB)
    client.volumes.map(v, host="esx1")
    client.volumes.unmap(v, host="esx1")
    client.volumes.delete(v)
    """

    path = "/volumes"
    model = Volume

    def create(self, name: str, *, pool: str | None = None, size: int | None = None, thin: bool | None = None, **fields: Any) -> Volume:
        """Create a volume of ``size`` bytes (a multiple of 8 GiB) in ``pool``."""
        return super().create(name, pool=pool, size=size, thin=thin, **fields)

    def resize(self, ref: str | Volume, size: int, *, if_match: str | None = None) -> Volume:
        """Grow to ``size`` bytes; the same size is a no-op answering the volume."""
        return self.update(ref, size=size, if_match=if_match)

    def map(self, ref: str | Volume, host: str, *, read_only: bool = False) -> Volume:
        """Map to a host (id or name); mapping again to the same host changes nothing."""
        body: dict[str, Any] = {"host": host}
        if read_only:
            body["read_only"] = True
        return self._one(self._t.request("POST", f"{self.path}/{_ref(ref)}/map", json_body=body))

    def unmap(self, ref: str | Volume, host: str) -> Volume:
        """Unmap from a host."""
        return self._one(self._t.request("POST", f"{self.path}/{_ref(ref)}/unmap", json_body={"host": host}))


class Hosts(Collection[Host]):
    """``client.hosts.create("esx1", type="iscsi", iqn="iqn.1998-01.com.vmware:esx1")``."""

    path = "/hosts"
    model = Host


class Users(Collection[User]):
    """``client.users.create("ops", role="operator", password=...)`` (admin only)."""

    path = "/users"
    model = User


class MdmMembers(Collection[MdmMember]):
    """``client.mdm.list()``, ``client.mdm.set_leader("mdm2")``."""

    path = "/mdm/members"
    model = MdmMember

    def set_leader(self, ref: str) -> Job | None:
        r = self._t.request("POST", "/mdm/leader", json_body={"member": ref})
        return _accepted_job(self._t, r)


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
            time.sleep(min(poll, max(0.0, deadline - time.monotonic())))


class Events:
    """``client.events.list(after=last_id, severity="warning", object="sds1")``."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def list(self, **filters: Any) -> list[Event]:
        r = self._t.request("GET", "/events", params=filters)
        items = r.body.get("items", []) if isinstance(r.body, dict) else r.body or []
        return [Event.from_dict(x) for x in items if isinstance(x, dict)]


class Alerts:
    """``client.alerts.list(severity="critical")``: open alerts (and cleared ones with ``cleared=true``)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def list(self, **filters: Any) -> list[Alert]:
        r = self._t.request("GET", "/alerts", params=filters)
        items = r.body.get("items", []) if isinstance(r.body, dict) else r.body or []
        return [Alert.from_dict(x) for x in items if isinstance(x, dict)]


class StatisticsApi:
    """``client.statistics.get()`` (system) or ``.get("volumes", "db1")``."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def get(self, kind: str | None = None, ref: str | None = None) -> Statistics:
        path = "/statistics" if kind is None else f"/statistics/{quote(kind, safe='')}/{_ref(ref or '')}"
        r = self._t.request("GET", path)
        if not isinstance(r.body, dict):
            raise ApiError(r.status, "invalid_response", f"{path}: expected an object")
        return Statistics.from_dict(r.body)


class SystemApi:
    """``client.system.get()``, ``client.system.capacity()``, ``client.system.bootstrap("prod")``."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def get(self) -> System:
        r = self._t.request("GET", "/system")
        if not isinstance(r.body, dict):
            raise ApiError(r.status, "invalid_response", "/system: expected an object")
        return System.from_dict(r.body, _etag(r))

    def capacity(self) -> Any:
        """The system's capacity (bytes): raw, usable, spare_reserved, allocated, free, ..."""
        s = self.get()
        if s.capacity is None:
            raise ApiError(200, "invalid_response", "the gateway's /system has no capacity; is it older than this client?")
        return s.capacity

    def bootstrap(self, name: str) -> System:
        """Create the system once; repeating with the same name answers it, another name is AlreadyExists."""
        try:
            r = self._t.request("POST", "/system/bootstrap", json_body={"name": name})
        except Unavailable:
            s = self.get()
            if s.name == name:
                return s
            raise
        if not isinstance(r.body, dict):
            raise ApiError(r.status, "invalid_response", "/system/bootstrap: expected an object")
        return System.from_dict(r.body)


__all__ = [
    "Alerts",
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
    "Users",
    "Volumes",
]
