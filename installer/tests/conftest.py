"""Fixtures: the simulated vCenter (cairn-vcsim), the plugin server, a real
local Cairn cluster (tests/lib/cluster.sh), OVAs. Everything a fixture
starts it stops by pid, and its files live under pytest's tmp_path."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APPLIANCE_BIN = Path(os.environ.get("CAIRN_BIN") or ROOT / "appliance" / "bin")
PLUGIN_BIN = Path(os.environ.get("CAIRN_PLUGIN_BIN") or ROOT / "vcenter-plugin" / "bin")
OVA_CHECKER = Path(os.environ.get("CAIRN_OVA_CHECKER") or ROOT / "packer" / ".work" / "bin" / "cairn-ova")


def need(path: Path, how: str) -> Path:
    """A missing binary fails the suite (never a silent skip) with the command that builds it."""
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is missing: {how}", pytrace=False)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float, what: str, proc: subprocess.Popen[bytes] | None = None, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log else ""
            raise AssertionError(f"{what} exited with status {proc.returncode} before listening:\n{tail}")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"{what} did not listen on 127.0.0.1:{port} within {timeout} s")


def stop(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=15)


def sha256_of_pem(pem: str) -> str:
    out = subprocess.run(["openssl", "x509", "-in", pem, "-noout", "-fingerprint", "-sha256"], capture_output=True, text=True, check=True)
    return out.stdout.strip().split("=", 1)[1]


@dataclass
class VCSim:
    url: str
    user: str
    password: str
    cert: str
    sha256: str
    dir: Path
    proc: subprocess.Popen[bytes]

    @property
    def port(self) -> int:
        return int(self.url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])

    def env(self, **extra: str) -> dict[str, str]:
        """The installer's environment for this vCenter (password in the environment, never argv)."""
        e = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
        e.update(
            CAIRN_VCENTER=self.url, CAIRN_VCENTER_USER=self.user, CAIRN_VCENTER_PASSWORD=self.password, CAIRN_OVA_CHECKER=str(OVA_CHECKER)
        )
        e.update(extra)
        return e

    def si(self) -> object:
        """A pyVmomi session of the test itself, to assert vCenter's state."""
        from cairn_install.vcenter import Target, TlsPolicy, connect

        return connect(Target("127.0.0.1", self.port, self.user, self.password, TlsPolicy(ca_file=self.cert)))


def start_vcsim(dir: Path, *args: str) -> VCSim:
    exe = need(PLUGIN_BIN / "cairn-vcsim", "build it with: cd vcenter-plugin && go build -o bin/ ./cmd/cairn-vcsim")
    dir.mkdir(parents=True, exist_ok=True)
    envf = dir / "vcsim.env"
    log = open(dir / "vcsim.log", "wb")  # noqa: SIM115 - closed with the process
    p = subprocess.Popen(
        [str(exe), "-template", "", "-dir", str(dir / "ds"), "-env-file", str(envf), *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    deadline = time.monotonic() + 60
    while not (envf.exists() and envf.read_text().count("\n") >= 5):
        if p.poll() is not None or time.monotonic() > deadline:
            stop(p)
            raise AssertionError(f"cairn-vcsim did not start: {(dir / 'vcsim.log').read_text()[-2000:]}")
        time.sleep(0.1)
    kv = dict(line.split("=", 1) for line in envf.read_text().splitlines() if "=" in line)
    cert = kv["CAIRN_VCSIM_CERT"]
    return VCSim(kv["CAIRN_VCSIM_URL"], kv["CAIRN_VCSIM_USERNAME"], kv["CAIRN_VCSIM_PASSWORD"], cert, sha256_of_pem(cert), dir, p)


@pytest.fixture
def vcsim(tmp_path: Path) -> Iterator[VCSim]:
    """A fresh simulated vCenter per test: 4 hosts, each with a local datastore, no template."""
    (tmp_path / "vc" / "ds").mkdir(parents=True)
    v = start_vcsim(tmp_path / "vc")
    try:
        yield v
    finally:
        stop(v.proc)
        with_cert = Path(v.cert)
        if with_cert.exists() and with_cert.parent == Path("/tmp"):
            with_cert.unlink()


@dataclass
class Plugin:
    url: str
    cert: str
    sha256: str
    proc: subprocess.Popen[bytes]


def start_plugin(vc: VCSim, dir: Path) -> Plugin:
    exe = need(PLUGIN_BIN / "cairn-plugin", "build it with: cd vcenter-plugin && go build -o bin/ ./cmd/cairn-plugin")
    port = free_port()
    dir.mkdir(parents=True, exist_ok=True)
    from cairn_install.vcenter import server_sha256

    thumb_sha1 = (
        subprocess.run(["openssl", "x509", "-in", vc.cert, "-noout", "-fingerprint", "-sha1"], capture_output=True, text=True, check=True)
        .stdout.strip()
        .split("=", 1)[1]
    )
    log = open(dir / "plugin.log", "wb")  # noqa: SIM115 - closed with the process
    p = subprocess.Popen(
        [str(exe), "-listen", f"127.0.0.1:{port}", "-vcenter", vc.url, "-vcenter-thumbprint", thumb_sha1, "-state-dir", str(dir / "state")],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    wait_port(port, 60, "cairn-plugin", p, dir / "plugin.log")
    cert = str(dir / "state" / "plugin-cert.pem")
    from cairn_install.vcenter import colon_hex

    return Plugin(f"https://127.0.0.1:{port}", cert, colon_hex(server_sha256("127.0.0.1", port)), p)


@pytest.fixture
def plugin(vcsim: VCSim, tmp_path: Path) -> Iterator[Plugin]:
    pl = start_plugin(vcsim, tmp_path / "plugin")
    try:
        yield pl
    finally:
        stop(pl.proc)


@dataclass
class OVA:
    path: str
    version: str
    kind: str  # "real (packer/output)" or "generated"


def make_ova(dir: Path, version: str, *, disk_bytes: int = 64 << 20, random_mib: int = 0) -> str:
    """A small real OVA: a streamOptimized VMDK (qemu-img) packed by cairn-ova build."""
    checker = need(OVA_CHECKER, "build it with: make -C packer tools")
    qemu_img = shutil.which("qemu-img")
    if qemu_img is None:
        pytest.fail("qemu-img is missing: apt-get install -y qemu-utils", pytrace=False)
    dir.mkdir(parents=True, exist_ok=True)
    raw = dir / f"disk-{version}.raw"
    with open(raw, "wb") as f:
        f.truncate(disk_bytes)
        if random_mib:
            # Incompressible data, so the streamed disk is random_mib large.
            f.seek(0)
            f.write(os.urandom(random_mib << 20))
    vmdk = dir / f"disk-{version}.vmdk"
    subprocess.run([qemu_img, "convert", "-O", "vmdk", "-o", "subformat=streamOptimized", str(raw), str(vmdk)], check=True)
    raw.unlink()
    out = dir / f"cairn-svm-{version}.ova"
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
    subprocess.run(
        [str(checker), "build", "-disk", str(vmdk), "-version", version, "-out", str(out)], check=True, env=env, capture_output=True
    )
    vmdk.unlink()
    return str(out)


@pytest.fixture(scope="session")
def svm_ova(tmp_path_factory: pytest.TempPathFactory) -> OVA:
    """The real OVA when packer/output has one, else a small generated one (the run says which)."""
    real = sorted((ROOT / "packer" / "output").glob("*.ova"), key=lambda p: p.stat().st_mtime)
    if real:
        from cairn_install import ova

        o = ova.read(str(real[-1]))
        OVA_USED.append(f"the real OVA {real[-1]} (version {o.version})")
        return OVA(str(real[-1]), o.version, "real (packer/output)")
    path = make_ova(tmp_path_factory.mktemp("ova"), "9.9.1-test")
    OVA_USED.append(f"a small generated OVA {path} (packer/output has none: 'make appliance' builds the real one)")
    return OVA(path, "9.9.1-test", "generated")


OVA_USED: list[str] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Says which OVA the upload tests used."""
    for what in OVA_USED:
        terminalreporter.write_line(f"OVA upload tested on {what}")
