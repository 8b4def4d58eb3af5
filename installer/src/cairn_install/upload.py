"""Upload the SVM OVA as a template to chosen hosts, in parallel.

Per host: ImportVApp on the host's datastore, stream each disk out of the
OVA to its HTTP NFC lease URL, keep the lease alive (HttpNfcLeaseProgress
every few seconds, also while the upload stalls), complete the lease and
mark the VM as a template named ``cairn-svm-<version>-<host>``.

Invariant: when an import does not complete - an error, a lease aborted or
expired, Ctrl-C - the half-imported VM is removed before the worker ends,
so vCenter never keeps a VM that looks like a template but is not one. A
VM left by an installer that was killed outright (not a template, with the
template's name) is removed and imported again on the next run.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import requests
from pyVmomi import vim, vmodl

from . import ova as ovamod
from .errors import Exit, InstallerError
from .vcenter import Target, connect, disconnect

KEEPALIVE_SECONDS = 5.0
CHUNK = 1 << 20


class Cancelled(Exception):
    """The user interrupted (Ctrl-C)."""


@dataclass
class HostResult:
    host: str
    template: str
    datastore: str = ""
    status: str = ""  # uploaded | skipped | failed | cancelled
    message: str = ""
    seconds: float = 0.0
    cleaned_up: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Progress:
    """One line of per-host percentages on a terminal; steps of 25% otherwise."""

    out: Any = field(default_factory=lambda: sys.stderr)
    _pct: dict[str, float] = field(default_factory=dict)
    _said: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _t0: float = field(default_factory=time.monotonic)
    _last: float = 0.0

    def update(self, host: str, pct: float) -> None:
        with self._lock:
            self._pct[host] = pct
            tty = bool(getattr(self.out, "isatty", lambda: False)())
            if tty:
                now = time.monotonic()
                if now - self._last < 0.2 and pct < 100:
                    return
                self._last = now
                bars = "  ".join(f"{h.split('.')[0]} [{_bar(p)}] {p:3.0f}%" for h, p in sorted(self._pct.items()))
                self.out.write(f"\r{bars} {time.monotonic() - self._t0:4.0f}s")
            else:
                step = int(pct // 25) * 25
                if step <= self._said.get(host, -1):
                    return
                self._said[host] = step
                self.out.write(f"upload {host}: {step}%\n")
            self.out.flush()

    def done(self) -> None:
        with self._lock:
            if self._pct and getattr(self.out, "isatty", lambda: False)():
                self.out.write("\n")
                self.out.flush()


def _bar(p: float, width: int = 20) -> str:
    n = int(width * min(max(p, 0.0), 100.0) / 100)
    return "#" * n + " " * (width - n)


@dataclass(frozen=True)
class Options:
    hosts: list[str]  # empty: every connected host
    datastores: dict[str, str]  # host -> datastore; "*" -> for every host
    network: str | None  # network for every OVF network; None: the host's first
    provisioning: str = "thin"  # thin | thick
    limit_rate: int = 0  # bytes/s per host; 0 = unlimited
    parallel: int = 4


def all_hosts(content: Any) -> list[Any]:
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
    try:
        return list(view.view)
    finally:
        view.Destroy()


@dataclass(frozen=True)
class VMInfo:
    vm: Any
    name: str
    template: bool
    host: str
    power_state: str
    vapp: Any  # config.vAppConfig or None


def vms(content: Any) -> list[VMInfo]:
    """Every VM with the properties the installer reads, in one consistent
    PropertyCollector read: VMs vanishing meanwhile (a lease abort removes
    its VM) are simply absent, never a ManagedObjectNotFound halfway."""
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
    try:
        spec = vmodl.query.PropertyCollector.FilterSpec(
            objectSet=[
                vmodl.query.PropertyCollector.ObjectSpec(
                    obj=view,
                    skip=True,
                    selectSet=[
                        vmodl.query.PropertyCollector.TraversalSpec(name="view", path="view", skip=False, type=vim.view.ContainerView)
                    ],
                )
            ],
            propSet=[
                vmodl.query.PropertyCollector.PropertySpec(
                    type=vim.VirtualMachine,
                    pathSet=["name", "config.template", "runtime.host", "runtime.powerState", "config.vAppConfig"],
                )
            ],
        )
        objs = content.propertyCollector.RetrieveContents([spec])
    finally:
        view.Destroy()
    hosts = {h._moId: h.name for h in all_hosts(content)}
    out: list[VMInfo] = []
    for o in objs:
        p = {x.name: x.val for x in o.propSet}
        host = p.get("runtime.host")
        out.append(
            VMInfo(
                vm=o.obj,
                name=str(p.get("name", "")),
                template=bool(p.get("config.template", False)),
                host=hosts.get(host._moId, "") if host is not None else "",
                power_state=str(p.get("runtime.powerState", "")),
                vapp=p.get("config.vAppConfig"),
            )
        )
    return out


def _datacenter(obj: Any) -> Any:
    while obj is not None and not isinstance(obj, vim.Datacenter):
        obj = obj.parent
    if obj is None:
        raise InstallerError(Exit.FAILED, "host has no datacenter above it")
    return obj


def _pick_datastore(host: Any, opts: Options, need: int) -> Any:
    name = opts.datastores.get(host.name) or opts.datastores.get("*")
    dss = [d for d in host.datastore if d.summary.accessible]
    if name:
        match = [d for d in dss if d.name == name]
        if not match:
            raise InstallerError(
                Exit.USAGE, f"host {host.name} has no accessible datastore {name!r} (it has: {', '.join(d.name for d in dss) or 'none'})"
            )
        ds = match[0]
    else:
        local = [d for d in dss if not d.summary.multipleHostAccess]
        if not local:
            raise InstallerError(Exit.USAGE, f"host {host.name} has no local datastore: name one with --datastore {host.name}=DATASTORE")
        ds = max(local, key=lambda d: d.summary.freeSpace)
    free = int(ds.summary.freeSpace)
    if free < need:
        raise InstallerError(
            Exit.NO_SPACE,
            f"datastore {ds.name} on host {host.name} has {free / 2**30:.2f} GiB free; the template needs "
            f"{need / 2**30:.2f} GiB ({opts.provisioning}): free space, pick another with --datastore {host.name}=DATASTORE"
            + (", or use --disk-provisioning thin" if opts.provisioning != "thin" else ""),
        )
    return ds


def plan_hosts(si: Any, o: ovamod.Ova, opts: Options) -> tuple[list[tuple[Any, Any]], list[HostResult]]:
    """Resolve hosts and datastores, check space; returns (to upload, skipped). Changes nothing."""
    content = si.content
    hosts = {h.name: h for h in all_hosts(content)}
    names = opts.hosts or sorted(n for n, h in hosts.items() if h.runtime.connectionState == "connected")
    missing = [n for n in names if n not in hosts]
    if missing:
        raise InstallerError(Exit.USAGE, f"no such host(s) in vCenter: {', '.join(missing)} (hosts: {', '.join(sorted(hosts))})")
    templates = {v.name: v for v in vms(content) if v.name.startswith(ovamod.TEMPLATE_PREFIX)}
    need = o.required_bytes(opts.provisioning)
    todo: list[tuple[Any, Any]] = []
    skipped: list[HostResult] = []
    problems: list[InstallerError] = []
    for n in names:
        h = hosts[n]
        tname = ovamod.template_name(o.version, n)
        have = templates.get(tname)
        if have is not None and have.template:
            skipped.append(HostResult(n, tname, status="skipped", message=f"template {tname} of version {o.version} is already there"))
            continue
        if h.runtime.connectionState != "connected":
            problems.append(InstallerError(Exit.FAILED, f"host {n} is {h.runtime.connectionState}: reconnect it or leave it out (--host)"))
            continue
        try:
            todo.append((h, _pick_datastore(h, opts, need)))
        except InstallerError as e:
            problems.append(e)
    if problems:
        code = problems[0].code if all(p.code == problems[0].code for p in problems) else Exit.FAILED
        raise InstallerError(code, "\n".join(p.message for p in problems))
    return todo, skipped


def upload(
    target: Target,
    o: ovamod.Ova,
    opts: Options,
    progress: Progress,
    cancel: threading.Event,
    on_started: Callable[[], None] | None = None,
) -> list[HostResult]:
    """Upload to every chosen host; one vCenter session per worker."""
    si = connect(target)
    try:
        planned, results = plan_hosts(si, o, opts)
        todo = [(h.name, ds.name) for h, ds in planned]
    finally:
        disconnect(si)
    if on_started:
        on_started()
    if not todo:
        return results
    pool = ThreadPoolExecutor(max_workers=max(1, min(opts.parallel, len(todo))), thread_name_prefix="upload")
    futs: dict[Future[HostResult], str] = {}
    for host_name, ds_name in todo:
        futs[pool.submit(_upload_host, target, o, opts, host_name, ds_name, progress, cancel)] = host_name
    try:
        pending = set(futs)
        while pending:
            # A short timeout keeps the main thread responsive to Ctrl-C.
            _, pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
    except KeyboardInterrupt:
        cancel.set()
        progress.done()
        progress.out.write("interrupted: aborting the uploads and removing half-imported VMs...\n")
        progress.out.flush()
        wait(set(futs))  # workers abort their leases and remove half-imported VMs
        progress.done()
        pool.shutdown()
        raise
    pool.shutdown()
    progress.done()
    for f in futs:
        results.append(f.result())
    return sorted(results, key=lambda r: r.host)


def _upload_host(
    target: Target, o: ovamod.Ova, opts: Options, host_name: str, ds_name: str, progress: Progress, cancel: threading.Event
) -> HostResult:
    tname = ovamod.template_name(o.version, host_name)
    res = HostResult(host_name, tname, ds_name)
    t0 = time.monotonic()
    try:
        si = connect(target)
    except InstallerError as e:
        res.status, res.message = "failed", e.message
        return res
    lease: Any = None
    try:
        content = si.content
        host = next(h for h in all_hosts(content) if h.name == host_name)
        ds = next(d for d in host.datastore if d.name == ds_name)
        dc = _datacenter(host)
        _remove_leftover(content, tname, res)
        lease, items = _start_import(content, o, opts, host, ds, dc, tname)
        _transfer(target, o, lease, items, opts, host_name, progress, cancel)
        vm = lease.info.entity  # read first: a completed lease may vanish at once
        lease.HttpNfcLeaseProgress(100)
        lease.HttpNfcLeaseComplete()
        lease = None
        vm.MarkAsTemplate()
        res.status, res.message = "uploaded", res.message + f"template {tname} on {ds_name}"
    except Cancelled:
        res.status, res.message = "cancelled", "interrupted"
        res.cleaned_up = _cleanup_anyway(target, si, lease, tname, "interrupted by the user")
    except InstallerError as e:
        res.status, res.message = "failed", e.message
        res.cleaned_up = _cleanup_anyway(target, si, lease, tname, e.message)
    except Exception as e:  # a vSphere fault, an HTTP error: report it per host
        res.status, res.message = "failed", _fault_text(e)
        res.cleaned_up = _cleanup_anyway(target, si, lease, tname, res.message)
    finally:
        res.seconds = round(time.monotonic() - t0, 1)
        disconnect(si)
    return res


def _cleanup_anyway(target: Target, si: Any, lease: Any, tname: str, why: str) -> bool:
    """Clean up with the worker's session, or with a new one when that session
    is gone (expired, or terminated by an admin: the usual cause of a failed
    import), so the half-imported VM is removed whatever ended the upload."""
    try:
        return _cleanup(si.content, lease, tname, why)
    except vim.fault.NotAuthenticated:
        pass
    fresh = connect(target)
    try:
        return _cleanup(fresh.content, None, tname, why)
    finally:
        disconnect(fresh)


def _fault_text(e: BaseException) -> str:
    msg = getattr(e, "msg", None) or str(e) or type(e).__name__
    return f"{type(e).__name__}: {msg}"


def _remove_leftover(content: Any, tname: str, res: HostResult) -> None:
    """A non-template VM with the template's name is a half import of a killed run."""
    for v in vms(content):
        if v.name == tname and not v.template:
            _destroy(v.vm)
            res.message = f"removed the half-imported {tname} of an earlier run; "


def _start_import(content: Any, o: ovamod.Ova, opts: Options, host: Any, ds: Any, dc: Any, tname: str) -> tuple[Any, list[Any]]:
    nets = host.network
    if opts.network:
        net = next((n for n in nets if n.name == opts.network), None)
        if net is None:
            raise InstallerError(
                Exit.USAGE, f"host {host.name} has no network {opts.network!r} (it has: {', '.join(n.name for n in nets)})"
            )
    elif nets:
        net = nets[0]
    else:
        raise InstallerError(Exit.USAGE, f"host {host.name} has no network to connect the SVM to")
    params = vim.OvfManager.CreateImportSpecParams(
        entityName=tname,
        diskProvisioning="thin" if opts.provisioning == "thin" else "thick",
        networkMapping=[vim.OvfManager.NetworkMapping(name=n, network=net) for n in o.networks],
    )
    spec = content.ovfManager.CreateImportSpec(ovfDescriptor=o.descriptor, resourcePool=host.parent.resourcePool, datastore=ds, cisp=params)
    if spec.error:
        raise InstallerError(Exit.OVA_INVALID, "vCenter refuses the OVF: " + "; ".join(_fault_text(f) for f in spec.error))
    lease = host.parent.resourcePool.ImportVApp(spec=spec.importSpec, folder=dc.vmFolder, host=host)
    deadline = time.monotonic() + 300
    while lease.state == vim.HttpNfcLease.State.initializing:
        if time.monotonic() > deadline:
            raise InstallerError(Exit.FAILED, "the NFC lease did not become ready within 5 min")
        time.sleep(0.2)
    if lease.state != vim.HttpNfcLease.State.ready:
        raise InstallerError(Exit.FAILED, f"the NFC lease is {lease.state}: {_fault_text(lease.error) if lease.error else ''}")
    return lease, list(spec.fileItem or [])


def _transfer(
    target: Target, o: ovamod.Ova, lease: Any, items: list[Any], opts: Options, host_name: str, progress: Progress, cancel: threading.Event
) -> None:
    by_key = {fi.deviceId: fi for fi in items}
    urls = [(du, by_key[du.importKey]) for du in lease.info.deviceUrl if du.importKey in by_key]
    total = sum(o.members[fi.path].size for _, fi in urls) or 1
    sent = [0]
    stop_keepalive = threading.Event()
    lease_error: list[BaseException] = []

    def keepalive() -> None:
        # Also while a PUT stalls: the lease expires without progress calls.
        while not stop_keepalive.wait(KEEPALIVE_SECONDS):
            try:
                lease.HttpNfcLeaseProgress(min(99, int(100 * sent[0] / total)))
            except Exception as e:
                lease_error.append(e)
                return

    ka = threading.Thread(target=keepalive, name=f"keepalive-{host_name}", daemon=True)
    ka.start()
    try:
        with target.tls.session() as http, open(o.path, "rb") as f:
            for du, fi in urls:
                m = o.members[fi.path]
                url = du.url.replace("*", target.host)
                headers = {"Content-Type": "application/x-vnd.vmware-streamVmdk"}
                body = _Body(_stream(f, m, sent, total, host_name, progress, cancel, opts.limit_rate, lease_error), m.size)
                try:
                    r = http.request("PUT" if fi.create else "POST", url, data=body, headers=headers, timeout=(10, 300))
                except requests.RequestException as e:
                    if cancel.is_set():
                        raise Cancelled() from e
                    if lease_error:
                        raise InstallerError(Exit.FAILED, f"the NFC lease ended during the upload: {_fault_text(lease_error[0])}") from e
                    raise InstallerError(Exit.FAILED, f"upload of {fi.path} to {host_name} failed: {e}") from e
                if r.status_code >= 300:
                    raise InstallerError(Exit.FAILED, f"upload of {fi.path} to {host_name}: HTTP {r.status_code} {r.text[:200]}")
    finally:
        stop_keepalive.set()
        ka.join(timeout=30)
    if lease_error:
        raise InstallerError(Exit.FAILED, f"the NFC lease ended during the upload: {_fault_text(lease_error[0])}")


class _Body:
    """A streamed request body of known length (sent with Content-Length, not chunked)."""

    def __init__(self, it: Iterator[bytes], size: int) -> None:
        self._it, self._size = it, size

    def __iter__(self) -> Iterator[bytes]:
        return self._it

    def __len__(self) -> int:
        return self._size


def _stream(
    f: BinaryIO,
    m: ovamod.Member,
    sent: list[int],
    total: int,
    host: str,
    progress: Progress,
    cancel: threading.Event,
    limit_rate: int,
    lease_error: list[BaseException],
) -> Iterator[bytes]:
    # Each worker has its own file object; reads are positioned explicitly.
    pos, end = m.offset, m.offset + m.size
    t0, mine = time.monotonic(), 0
    while pos < end:
        if cancel.is_set():
            raise Cancelled()
        if lease_error:
            raise InstallerError(Exit.FAILED, f"the NFC lease ended during the upload: {_fault_text(lease_error[0])}")
        n = min(CHUNK if not limit_rate else max(4096, min(CHUNK, limit_rate // 8)), end - pos)
        f.seek(pos)
        chunk = f.read(n)
        if not chunk:
            raise InstallerError(Exit.OVA_INVALID, f"{m.name}: the OVA ends early")
        pos += len(chunk)
        mine += len(chunk)
        sent[0] += len(chunk)
        yield chunk
        progress.update(host, 100.0 * sent[0] / total)
        if limit_rate:
            ahead = mine / limit_rate - (time.monotonic() - t0)
            while ahead > 0:
                if cancel.wait(min(ahead, 0.2)):
                    raise Cancelled()
                ahead = mine / limit_rate - (time.monotonic() - t0)


def _cleanup(content: Any, lease: Any, tname: str, why: str) -> bool:
    """Abort the lease and remove the VM of an import that did not complete."""
    if lease is not None:
        try:
            if lease.state in (vim.HttpNfcLease.State.ready, vim.HttpNfcLease.State.initializing):
                lease.HttpNfcLeaseAbort(vim.fault.SystemError(reason=why[:200]))  # type: ignore[attr-defined]
        except Exception:  # noqa: S110 - the lease may already be gone; the VM removal below is what matters
            pass
    removed = False
    try:
        for v in vms(content):
            if v.name == tname and not v.template:
                _destroy(v.vm)
                removed = True
    except vmodl.fault.ManagedObjectNotFound:
        removed = True  # it went away on its own meanwhile
    return removed


def _destroy(vm: Any) -> None:
    if vm.runtime.powerState == vim.VirtualMachine.PowerState.poweredOn:
        _wait(vm.PowerOffVM_Task())
    _wait(vm.Destroy_Task())


def _wait(task: Any, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while task.info.state in (vim.TaskInfo.State.queued, vim.TaskInfo.State.running):
        if time.monotonic() > deadline:
            raise InstallerError(Exit.FAILED, f"vCenter task {task.info.key} did not finish within {timeout:.0f} s")
        time.sleep(0.2)
    if task.info.state == vim.TaskInfo.State.error:
        raise InstallerError(Exit.FAILED, f"vCenter task failed: {_fault_text(task.info.error)}")
