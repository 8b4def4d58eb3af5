"""The cairn client against a real local Cairn cluster (tests/lib/cluster.sh):
3 MDMs, 3 SDSs with file devices, the cluster's gateway and a second gateway
of this module's own (short token lifetime) for re-login and failover."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import cairn
from cairn import GiB
from cairn._http import Session
from cairn.models import Job
from conftest import APPLIANCE_BIN, ROOT, free_port, need, stop, wait_port

pytestmark = pytest.mark.cluster


@dataclass
class Cluster:
    dir: Path
    gateway: str  # the cluster's own gateway
    gateway2: str  # ours, --token-ttl 3s
    gw2: subprocess.Popen[bytes]
    ca_bundle: str  # the gateways' certificate
    password: str

    def client(self, *gateways: str, **kw: object) -> cairn.Client:
        return cairn.Client(list(gateways) or [self.gateway], "admin", self.password, ca_file=self.ca_bundle, timeout=60, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    need(APPLIANCE_BIN / "cairn", "build it with: make build")
    d = tmp_path_factory.mktemp("cluster")
    env = dict(os.environ, CAIRN_BIN=str(APPLIANCE_BIN))
    script = str(ROOT / "tests" / "lib" / "cluster.sh")
    gw2: subprocess.Popen[bytes] | None = None
    try:
        r = subprocess.run(
            [script, "start", str(d), "--sds", "3", "--devices-per-sds", "2", "--device-size", "4G", "--volume-size", "8GiB"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert r.returncode == 0, f"cluster.sh start failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        ports = dict(line.split("=", 1) for line in (d / "ports.env").read_text().split())
        mdm = ",".join(f"https://127.0.0.1:{ports[f'MDM{i}_CLIENT']}" for i in (1, 2, 3))
        port2 = free_port()
        # The second gateway serves the cluster's certificate, as an admin
        # installs one certificate on every gateway (two self-signed ones with
        # the same subject cannot share a CA bundle).
        (d / "gateway2").mkdir(mode=0o700)
        for f in ("cert.pem", "key.pem"):
            shutil.copy2(d / "gateway" / f, d / "gateway2" / f)
        log = open(d / "logs" / "gateway2.log", "wb")  # noqa: SIM115 - closed with the process
        gw2 = subprocess.Popen(
            [
                str(APPLIANCE_BIN / "cairn"),
                "gateway",
                "--listen",
                f"127.0.0.1:{port2}",
                "--state-dir",
                str(d / "gateway2"),
                "--token-ttl",
                "3s",
                # The cluster's gateway certificate: etcd and the SDSs
                # authenticate every gateway by it (cluster.sh issued it).
                "--pki",
                str(d / "pki" / "gateway"),
            ],
            env=dict(env, CAIRN_MDM=mdm),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        wait_port(port2, 60, "the second gateway", gw2, d / "logs" / "gateway2.log")
        spec = Session()
        spec.verify = str(d / "gateway" / "cert.pem")
        paths = spec.get(f"https://127.0.0.1:{ports['GW_PORT']}/api/v1/openapi.json", timeout=30).json().get("paths", {})
        if "/api/v1/protection-domains" not in paths:
            pytest.fail(
                f"the gateway in {APPLIANCE_BIN} predates docs/api.md (no /protection-domains): "
                "build it from a tree with that API (make build)",
                pytrace=False,
            )
        yield Cluster(
            d,
            f"127.0.0.1:{ports['GW_PORT']}",
            f"127.0.0.1:{port2}",
            gw2,
            str(d / "gateway" / "cert.pem"),
            (d / "gateway" / "admin-password").read_text().strip(),
        )
    finally:
        if gw2 is not None:
            stop(gw2)
        subprocess.run([script, "stop", str(d)], env=env, capture_output=True, timeout=120, check=False)


def test_volume_lifecycle_create_grow_map_unmap_delete(cluster: Cluster) -> None:
    with cluster.client() as c:
        v = c.volumes.create("py-v1", pool="pool1", size=8 * GiB)
        assert (v.name, v.pool_name, v.size, v.mappings) == ("py-v1", "pool1", 8 * GiB, [])
        assert v.etag, "a create answers the ETag"
        again = c.volumes.create("py-v1", pool="pool1", size=8 * GiB)  # idempotent repeat
        assert again.id == v.id
        with pytest.raises(cairn.AlreadyExists) as e:
            c.volumes.create("py-v1", pool="pool1", size=16 * GiB)
        assert e.value.status == 409 and e.value.code == "already_exists"

        v = c.volumes.resize(v, 16 * GiB)
        assert v.size == 16 * GiB
        assert c.volumes.resize("py-v1", 16 * GiB).size == 16 * GiB  # same size: 200, no change
        with pytest.raises(cairn.Invalid) as e2:
            c.volumes.resize("py-v1", 8 * GiB)
        assert e2.value.status == 400 and e2.value.field == "size"

        h = c.hosts.create("py-esx1", type="iscsi", iqn="iqn.1998-01.com.vmware:py-esx1")
        assert (h.type, h.iqn) == ("iscsi", "iqn.1998-01.com.vmware:py-esx1")
        v = c.volumes.map("py-v1", host="py-esx1")
        assert [(m.host_name, m.read_only) for m in v.mappings] == [("py-esx1", False)]
        assert isinstance(v.mappings[0].lun, int)
        assert c.volumes.map("py-v1", host="py-esx1").mappings == v.mappings  # mapping again changes nothing
        assert c.hosts.get("py-esx1").volume_names == ["py-v1"]
        assert [x.name for x in c.volumes.list(host="py-esx1")] == ["py-v1"]

        with pytest.raises(cairn.InUse) as e3:
            c.volumes.delete("py-v1")
        assert e3.value.code == "in_use" and e3.value.message
        v = c.volumes.unmap("py-v1", host="py-esx1")
        assert v.mappings == []
        c.volumes.delete("py-v1")
        with pytest.raises(cairn.NotFound) as e4:
            c.volumes.get("py-v1")
        assert e4.value.code == "not_found" and e4.value.field == "ref"
        c.volumes.delete("py-v1", missing_ok=True)
        c.hosts.delete("py-esx1")


def test_if_match_refuses_a_stale_update(cluster: Cluster) -> None:
    with cluster.client() as c:
        v = c.volumes.create("py-etag", pool="pool1", size=8 * GiB)
        stale = v.etag
        c.volumes.resize(v, 16 * GiB)  # uses v.etag: the current one
        with pytest.raises(cairn.Conflict) as e:
            c.volumes.resize("py-etag", 24 * GiB, if_match=stale)
        assert e.value.status == 412 and e.value.code == "conflict"
        assert c.volumes.get("py-etag").size == 16 * GiB  # the refusal changed nothing
        c.volumes.delete("py-etag")


def test_pools_and_protection_domains(cluster: Cluster) -> None:
    with cluster.client() as c:
        assert [p.name for p in c.protection_domains.list()] == ["pd1"]
        pool = c.pools.get("pool1")
        assert pool.protection_domain_name == "pd1" and pool.capacity is not None
        cap = pool.capacity
        assert cap.raw_bytes > 0 and cap.usable > 0 and cap.free <= cap.usable
        p2 = c.pools.create("py-pool", protection_domain="pd1")
        assert (p2.name, p2.protection_domain_name, p2.volume_count) == ("py-pool", "pd1", 0)
        assert [p.name for p in c.pools.list(protection_domain="pd1")] == ["pool1", "py-pool"]
        renamed = c.pools.update("py-pool", name="py-pool-b")
        assert renamed.id == p2.id and renamed.name == "py-pool-b"
        with pytest.raises(cairn.NotFound) as e:
            c.pools.create("py-pool-c", protection_domain="no-such-pd")
        assert e.value.field == "protection_domain"
        c.pools.delete(renamed)
        assert c.pools.find("py-pool-b") is None
        with pytest.raises(cairn.InUse):
            c.pools.delete("pool1")  # holds the cluster's volume
        sysinfo = c.system.get()
        assert sysinfo.bootstrapped and sysinfo.name == "cairn-local" and sysinfo.capacity is not None
        # Every daemon of the cluster (started with --pki) publishes the version it runs.
        release = (ROOT / "appliance/internal/buildinfo/VERSION").read_text().strip()
        v = c.system.versions()
        names = {(d.role, d.name) for d in v.daemons}
        assert not v.mixed and v.versions == {release: len(v.daemons)} and v.gateway == release, v.raw
        assert {("sds", "sds1"), ("sds", "sds3"), ("mdm", "mdm1")} <= names, v.raw


def test_join_tokens_create_list_revoke(cluster: Cluster) -> None:
    with cluster.client() as c:
        t = c.join_tokens.create(["sds", "target"], ttl_seconds=600)
        assert t.token.startswith(f"cj1.{t.id}.") and t.roles == ["sds", "target"] and not t.expired, t.raw
        assert t.token not in repr(t)
        listed = {x.id: x for x in c.join_tokens.list()}
        assert t.id in listed and listed[t.id].token == "", listed
        with pytest.raises(cairn.ApiError) as e:
            c.join_tokens.create(["wizard"])
        assert e.value.status == 400 and e.value.field == "roles"
        c.join_tokens.revoke(t.id)
        assert t.id not in {x.id for x in c.join_tokens.list()}
        with pytest.raises(cairn.NotFound):
            c.join_tokens.revoke(t.id)


def test_upgrade_bundles_upload_list_and_orders(cluster: Cluster, tmp_path: Path) -> None:
    # A bundle as an operator makes one: `cairn bundle` of a directory whose
    # cairn says its version (small stand-in binaries: the gateway checks
    # the format and digests, not what the binaries do).
    bins = tmp_path / "bin"
    bins.mkdir()
    (bins / "cairn").write_text("#!/bin/sh\necho 7.1.2\n")
    (bins / "cairnctl").write_text("#!/bin/sh\nexit 0\n")
    for f in bins.iterdir():
        f.chmod(0o755)
    out = tmp_path / "cairn-7.1.2.tgz"
    cmd = [str(APPLIANCE_BIN / "cairn"), "bundle", "--bin", str(bins), "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    with cluster.client() as c:
        b = c.upgrades.upload(out)
        assert (b.version, b.size) == ("7.1.2", out.stat().st_size) and len(b.sha256) == 64, b.raw
        assert b.version in {x.version: x for x in c.upgrades.bundles()}
        # The gateway's reasons come back as they are, and nothing is stored.
        with pytest.raises(cairn.Invalid) as e:
            c.upgrades.upload(b"not a bundle")
        assert "not gzip" in e.value.message, e.value
        damaged = bytearray(out.read_bytes())
        damaged[len(damaged) // 2] ^= 0xFF
        with pytest.raises(cairn.Invalid):
            c.upgrades.upload(bytes(damaged))
        assert [x.version for x in c.upgrades.bundles()].count("7.1.2") == 1
        # Over the bound: refused before a byte is sent.
        big = tmp_path / "big.tgz"
        with open(big, "wb") as sparse:
            sparse.truncate(c.upgrades.MAX_BUNDLE + 1)
        with pytest.raises(ValueError, match="up to 256 MiB"):
            c.upgrades.upload(big)
        # No updater runs in this cluster (they run on SVMs): the list is
        # empty and an order names what is missing.
        assert c.upgrades.svms() == []
        with pytest.raises(cairn.NotFound) as e2:
            c.upgrades.order("svm-none", "7.1.2")
        assert "svm-none" in e2.value.message, e2.value
        with pytest.raises(cairn.NotFound):
            c.upgrades.order("svm-none", "9.9.9")


def test_sds_maintenance_enter_exit(cluster: Cluster) -> None:
    with cluster.client() as c:
        s = c.sds.enter_maintenance("sds1", mode="instant")
        assert s.name == "sds1" and s.state == "maintenance", s.raw
        s = c.sds.exit_maintenance("sds1")
        assert s.state == "normal", s.raw


def test_mdm_members_and_moving_the_leader(cluster: Cluster) -> None:
    with cluster.client() as c:
        members = c.mdm.list()
        assert sorted(m.name for m in members) == ["mdm1", "mdm2", "mdm3"]
        assert sum(m.raft_leader for m in members) == 1 and all(m.started and not m.learner for m in members)
        leader = next(m.name for m in members if m.raft_leader)
        other = next(m.name for m in members if not m.raft_leader)
        assert c.mdm.set_leader(leader) == leader  # the raft leader: it takes the control loop too (or a repeat)
        assert c.mdm.set_leader(other) == other
        after = {m.name: m for m in c.mdm.list()}
        assert after[other].raft_leader and after[other].cairn_leader, [m.raw for m in after.values()]
        with pytest.raises(cairn.NotFound):
            c.mdm.set_leader("no-such-mdm")


def test_device_remove_is_a_job_with_progress(cluster: Cluster) -> None:
    with cluster.client() as c:
        job = c.devices.remove("sds3-dev2")
        assert job.kind == "device-remove" and job.object is not None and job.object.name == "sds3-dev2"
        seen: list[Job] = []
        done = c.jobs.wait(job, timeout=120, poll=0.5, progress=seen.append)
        assert done.state == "succeeded" and seen and seen[-1].state == "succeeded"
        assert c.devices.find("sds3-dev2") is None
        assert any(j.id == job.id for j in c.jobs.list())


def test_errors_carry_the_servers_code_and_events_record_calls(cluster: Cluster) -> None:
    with cluster.client() as c:
        with pytest.raises(cairn.Invalid) as e:
            c.volumes.create("py-bad", pool="pool1", size=12345)
        assert e.value.status == 400 and e.value.code == "invalid" and e.value.field == "size"
        with pytest.raises(cairn.NotFound) as e2:
            c.volumes.create("py-bad", pool="no-such-pool", size=8 * GiB)
        assert e2.value.field == "pool"
        with pytest.raises(cairn.NoChange):
            c.pools.update("pool1")
        evs = c.events.list(kind="audit", limit=1000)
        assert any(ev.path == "/api/v1/volumes" and ev.method == "POST" and ev.status == 400 for ev in evs)
        # The live stream (SSE) from the last listed event on: the next audit event is ours.
        stream = c.events.stream(after=evs[-1].id, kind="audit")
        c.hosts.create("py-ev-host", type="nbd")
        ev = next(stream)
        assert (ev.method, ev.path, ev.status) == ("POST", "/api/v1/hosts", 201), ev.raw
        stream.close()
        c.hosts.delete("py-ev-host")
    with pytest.raises(cairn.Unauthorized) as e3:
        cairn.Client([cluster.gateway], "admin", "wrong-password", ca_file=cluster.ca_bundle).volumes.list()
    assert e3.value.status == 401 and e3.value.code == "unauthorized"


def test_password_guessing_is_throttled(cluster: Cluster) -> None:
    # Its own user: a lockout of admin would stop the other tests.
    password = secrets.token_urlsafe(18)
    with cluster.client() as c:
        c.users.create("py-guessed", role="monitor", password=password)
    guesser = cairn.Client([cluster.gateway], "py-guessed", "not-it", ca_file=cluster.ca_bundle)
    statuses = []
    for _ in range(8):
        try:
            guesser.login()
        except cairn.Throttled as e:
            statuses.append(429)
            assert e.retry_after is not None and 1 <= e.retry_after <= 60, e.retry_after
            assert "wait" in e.message and "Retry-After" in e.message
            break
        except cairn.Unauthorized:
            statuses.append(401)
    assert statuses == [401] * 5 + [429], statuses
    # Locked out even with the right password until the lockout ends.
    with pytest.raises(cairn.Throttled):
        cairn.Client([cluster.gateway], "py-guessed", password, ca_file=cluster.ca_bundle).login()


def test_token_expiry_logs_in_again(cluster: Cluster) -> None:
    with cluster.client(cluster.gateway2) as c:
        assert c.volumes.get("vol1").name == "vol1"
        first = c.transport.token
        time.sleep(4)  # the second gateway's tokens last 3 s
        assert c.volumes.get("vol1").name == "vol1"
        assert c.transport.token != first


def test_failover_when_a_gateway_stops_mid_run(cluster: Cluster) -> None:
    # The module's own gateway is first: stopping it leaves the cluster's.
    with cluster.client(cluster.gateway2, cluster.gateway) as c:
        c.volumes.create("py-fo", pool="pool1", size=8 * GiB)
        assert c.transport.current_gateway == "https://" + cluster.gateway2
        stop(cluster.gw2)
        v = c.volumes.resize("py-fo", 16 * GiB)  # never reached the stopped gateway: sent to the next
        assert v.size == 16 * GiB
        assert c.transport.current_gateway == "https://" + cluster.gateway
        h = c.hosts.create("py-fo-host", type="nbd")
        assert h.name == "py-fo-host"
        c.hosts.delete(h)
        c.volumes.delete("py-fo")
        assert c.volumes.find("py-fo") is None
