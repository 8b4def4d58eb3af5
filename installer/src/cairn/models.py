"""Typed views of the gateway's objects (docs/api.md).

Each model is a dataclass with the fields the API documents; ``raw`` keeps
the whole object as the server sent it (fields added by a newer gateway are
there too) and ``etag`` the ETag of the answer it came from, for If-Match.
Sizes and capacities are bytes; rates are per second.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

T = TypeVar("T", bound="Model")

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40


@dataclass
class Model:
    """Base of every model: build one from the API's JSON with :meth:`from_dict`."""

    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    etag: str | None = field(default=None, repr=False, compare=False)

    # Nested models by field name, converted by from_dict.
    _nested: ClassVar[dict[str, type[Model]]] = {}
    _nested_lists: ClassVar[dict[str, type[Model]]] = {}
    # Model field -> JSON key, where the JSON key is taken (``raw``).
    _keys: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_dict(cls: type[T], doc: dict[str, Any], etag: str | None = None) -> T:
        """Build from the API's JSON object; unknown fields stay in ``raw`` only.

        >>> Volume.from_dict({"id": "v1", "name": "db", "size": 8, "new_field": 1}).size
        8
        """
        kw: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            key = cls._keys.get(f.name, f.name)
            if f.name in ("raw", "etag") or key not in doc:
                continue
            v = doc[key]
            if f.name in cls._nested and isinstance(v, dict):
                v = cls._nested[f.name].from_dict(v)
            elif f.name in cls._nested_lists and isinstance(v, list):
                v = [cls._nested_lists[f.name].from_dict(x) for x in v if isinstance(x, dict)]
            kw[f.name] = v
        obj = cls(**kw)
        obj.raw = dict(doc)
        obj.etag = etag
        return obj


@dataclass
class Ref(Model):
    """A reference to another object, as events, jobs and alerts carry it."""

    kind: str = ""
    id: str = ""
    name: str = ""


@dataclass
class Capacity(Model):
    """Capacity of the system or a pool, in bytes (docs/api.md section 6).

    "usable" figures are after the two copies; ``raw_bytes`` (JSON ``raw``)
    and ``raw_allocated`` are as on the devices."""

    raw_bytes: int = 0
    usable: int = 0
    spare_reserved: int = 0
    allocated: int = 0
    raw_allocated: int = 0
    free: int = 0
    thick_reserved: int = 0
    thin_provisioned: int = 0
    over_provisioning_ratio: float = 0.0
    _keys: ClassVar[dict[str, str]] = {"raw_bytes": "raw"}


@dataclass
class ProtectionDomain(Model):
    id: str = ""
    name: str = ""
    fault_set_count: int = 0
    sds_count: int = 0
    pool_count: int = 0


@dataclass
class FaultSet(Model):
    id: str = ""
    name: str = ""
    protection_domain_id: str = ""
    protection_domain_name: str = ""
    sds_names: list[str] = field(default_factory=list)


@dataclass
class Maintenance(Model):
    mode: str = ""  # "" | instant | protected
    state: str = ""


@dataclass
class SDS(Model):
    id: str = ""
    name: str = ""
    protection_domain_id: str = ""
    protection_domain_name: str = ""
    fault_set_id: str = ""
    fault_set_name: str = ""
    address: str = ""
    state: str = ""  # normal | maintenance | protected-maintenance | removing
    rebuild_mbps: int = 0
    up: bool = False
    device_count: int = 0
    capacity: int = 0  # raw bytes of its devices in state normal
    raw_allocated: int = 0
    resync_bytes: int = 0
    maintenance: Maintenance | None = None
    _nested: ClassVar[dict[str, type[Model]]] = {"maintenance": Maintenance}


@dataclass
class Device(Model):
    id: str = ""
    name: str = ""
    sds_id: str = ""
    sds_name: str = ""
    pool_id: str = ""
    pool_name: str = ""
    path: str = ""
    capacity: int = 0
    raw_allocated: int = 0
    state: str = ""
    reported_state: str = ""
    error: str = ""


@dataclass
class Pool(Model):
    id: str = ""
    name: str = ""
    protection_domain_id: str = ""
    protection_domain_name: str = ""
    spare_percent: int = 0
    pg_count: int = 0
    zero_padding: bool = False
    rebuild_policy: str = ""
    rebuild_max_io: int = 0
    volume_count: int = 0
    device_count: int = 0
    sds_count: int = 0
    redundant: bool = False
    capacity: Capacity | None = None
    qos_iops_per_gib: int = 0
    qos_bandwidth_per_gib: int = 0
    _nested: ClassVar[dict[str, type[Model]]] = {"capacity": Capacity}


@dataclass
class Mapping(Model):
    """A volume's mapping to a host; ``lun`` is the LUN every host sees."""

    host_id: str = ""
    host_name: str = ""
    lun: int | None = None
    read_only: bool = False
    iops_limit: int = 0
    bandwidth_limit: int = 0


@dataclass
class Volume(Model):
    id: str = ""
    name: str = ""
    pool_id: str = ""
    pool_name: str = ""
    size: int = 0
    thin: bool = True
    wwn: str = ""
    serial: str = ""
    allocated: int = 0  # usable bytes of its chunks (one copy)
    created: str = ""
    iops_limit: int = 0
    bandwidth_limit: int = 0
    effective_iops_limit: int = 0
    effective_bandwidth_limit: int = 0
    io: dict[str, int] = field(default_factory=dict)  # cumulative counters; rates: client.statistics
    mappings: list[Mapping] = field(default_factory=list)
    _nested_lists: ClassVar[dict[str, type[Model]]] = {"mappings": Mapping}


@dataclass
class Host(Model):
    id: str = ""
    name: str = ""
    type: str = ""  # iscsi | nbd
    iqn: str = ""
    chap_user: str = ""
    chap: bool = False  # a CHAP secret is set (never returned)
    volume_names: list[str] = field(default_factory=list)


@dataclass
class User(Model):
    name: str = ""
    role: str = ""  # admin | operator | monitor


@dataclass
class MdmMember(Model):
    """An MDM (etcd) member; ``initial_cluster`` only in the answer to ``add``."""

    name: str = ""
    id: str = ""
    started: bool = False
    peer_urls: list[str] = field(default_factory=list)
    client_urls: list[str] = field(default_factory=list)
    learner: bool = False
    raft_leader: bool = False
    tie_breaker: bool = False
    cairn_leader: bool = False
    initial_cluster: str = ""


@dataclass
class Job(Model):
    """A long operation on the cluster; wait for it with ``client.jobs.wait(job)``."""

    id: str = ""
    kind: str = ""  # sds-remove | device-remove | ...
    object: Ref | None = None
    state: str = ""  # queued | running | succeeded | failed
    percent: float = 0.0
    eta_seconds: float | None = None
    message: str = ""
    result: Any = None
    error: Any = None  # the error shape {code, message, field} when failed
    user: str = ""
    created: str = ""
    updated: str = ""
    _nested: ClassVar[dict[str, type[Model]]] = {"object": Ref}

    @property
    def done(self) -> bool:
        return self.state in ("succeeded", "failed")


@dataclass
class Event(Model):
    id: str = ""
    time: str = ""
    severity: str = ""  # info | warning | error | critical
    kind: str = ""  # audit | login | state | rebuild | alert
    object: Ref | None = None
    message: str = ""
    user: str = ""
    method: str = ""
    path: str = ""
    status: int = 0
    _nested: ClassVar[dict[str, type[Model]]] = {"object": Ref}


@dataclass
class Alert(Model):
    id: str = ""
    severity: str = ""
    kind: str = ""
    object: Ref | None = None
    message: str = ""
    since: str = ""
    cleared: str | None = None
    _nested: ClassVar[dict[str, type[Model]]] = {"object": Ref}


@dataclass
class IOStats(Model):
    iops: float = 0.0
    bytes_per_second: float = 0.0
    latency_mean_us: float = 0.0
    latency_p99_us: float = 0.0


@dataclass
class Statistics(Model):
    timestamp: str = ""
    interval_seconds: float = 0.0
    read: IOStats | None = None
    write: IOStats | None = None
    throttled_seconds: float = 0.0
    history: list[Any] = field(default_factory=list)
    _nested: ClassVar[dict[str, type[Model]]] = {"read": IOStats, "write": IOStats}


@dataclass
class SystemInfo(Model):
    id: str = ""
    name: str = ""
    created: str = ""


@dataclass
class DaemonVersion(Model):
    role: str = ""
    name: str = ""
    version: str = ""


@dataclass
class Versions(Model):
    """``GET /system/versions``: the Cairn version each running daemon runs.

    ``mixed`` is true while more than one runs (a rolling upgrade under way or
    stopped part way; alert ``versions-mixed``).
    """

    gateway: str = ""
    versions: dict[str, int] = field(default_factory=dict)
    mixed: bool = False
    daemons: list[DaemonVersion] = field(default_factory=list)
    _nested_lists: ClassVar[dict[str, type[Model]]] = {"daemons": DaemonVersion}


@dataclass
class JoinToken(Model):
    """A join token (``POST /system/join-tokens``): a new node spends it once for its certificate.

    ``token`` (``cj1.<id>.<secret>.<ca-sha256>``) is set only in the answer to
    :meth:`JoinTokens.create`: it is a secret; the list never holds it.
    """

    id: str = ""
    token: str = field(default="", repr=False)
    roles: list[str] = field(default_factory=list)
    name: str = ""
    expires: str = ""
    expired: bool = False
    created_by: str = ""
    created: str = ""


@dataclass
class Bundle(Model):
    """An update bundle stored on the gateway (``GET``/``POST /upgrade/bundles``): what SVMs can be ordered to run."""

    version: str = ""
    sha256: str = ""
    size: int = 0
    uploaded: str = ""


@dataclass
class Updater(Model):
    """An SVM's updater as the gateway last heard it (``GET /upgrade/svms``).

    ``state``: idle, downloading, installing, done, failed or rolled-back;
    ``updated`` changes with every state the updater writes."""

    name: str = ""
    running: str = ""
    ordered: str = ""
    state: str = ""
    message: str = ""
    updated: str = ""

    @property
    def final(self) -> bool:
        """At rest after its order: done, failed or rolled back."""
        return self.state in ("done", "failed", "rolled-back")


@dataclass
class System(Model):
    """``GET /system``: identity, health, capacity, counts, rebuild, MDM leader."""

    bootstrapped: bool = False
    system: SystemInfo | None = None
    health: dict[str, Any] = field(default_factory=dict)
    capacity: Capacity | None = None
    counts: dict[str, int] = field(default_factory=dict)
    rebuild: dict[str, Any] = field(default_factory=dict)
    leader: str = ""
    _nested: ClassVar[dict[str, type[Model]]] = {"capacity": Capacity, "system": SystemInfo}

    @property
    def name(self) -> str:
        return self.system.name if self.system else ""
