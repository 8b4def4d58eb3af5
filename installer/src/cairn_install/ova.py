"""The SVM OVA: checking it (``cairn-ova check``) and reading what the upload needs.

An OVA is a ustar archive: the OVF descriptor, the manifest, then the disk
files (packer/tools/internal/ova documents the layout). The installer
streams each disk straight out of the archive at its offset, so an OVA of
several GB is never unpacked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from .errors import Exit, InstallerError

OVF_NS = "http://schemas.dmtf.org/ovf/envelope/1"
MAX_DESCRIPTOR = 4 << 20  # the same bound as cairn-ova check


@dataclass(frozen=True)
class Member:
    name: str
    offset: int  # of the content in the archive
    size: int


@dataclass(frozen=True)
class Disk:
    file: str  # member name
    size: int  # bytes in the archive (streamOptimized)
    capacity: int  # bytes the guest sees (what a thick disk takes)


@dataclass(frozen=True)
class Ova:
    path: str
    version: str
    descriptor: str
    members: dict[str, Member]
    disks: list[Disk]
    networks: list[str]

    def required_bytes(self, provisioning: str) -> int:
        """Datastore space an import takes: disk capacity when thick; the streamed size when thin."""
        if provisioning == "thin":
            return sum(d.size for d in self.disks)
        return sum(d.capacity for d in self.disks)


def find_checker(explicit: str | None) -> str:
    """The cairn-ova binary: --ova-checker, $CAIRN_OVA_CHECKER, PATH, or the repo's build."""
    for c in (explicit, os.environ.get("CAIRN_OVA_CHECKER")):
        if c:
            if not (os.path.isfile(c) and os.access(c, os.X_OK)):
                raise InstallerError(Exit.USAGE, f"OVA checker {c} is not an executable file")
            return c
    on_path = shutil.which("cairn-ova")
    if on_path:
        return on_path
    repo = Path(__file__).resolve().parents[3] / "packer" / ".work" / "bin" / "cairn-ova"
    if repo.is_file():
        return str(repo)
    raise InstallerError(
        Exit.USAGE,
        "cairn-ova (the OVA checker) not found: build it with 'make -C packer tools' or pass --ova-checker PATH",
    )


def check(path: str, checker: str, timeout: float = 600.0) -> str:
    """Run ``cairn-ova check``; returns its report, raises OVA_INVALID with its FAIL lines."""
    if not os.path.isfile(path):
        raise InstallerError(Exit.USAGE, f"OVA {path}: no such file")
    try:
        r = subprocess.run([checker, "check", path], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise InstallerError(Exit.FAILED, f"cairn-ova check {path} took longer than {timeout:.0f} s") from e
    out = (r.stdout + r.stderr).strip()
    if r.returncode != 0:
        fails = [ln for ln in out.splitlines() if ln.startswith("FAIL") or "cairn-ova:" in ln][:10]
        raise InstallerError(
            Exit.OVA_INVALID,
            f"the OVA {path} fails cairn-ova check:\n  "
            + "\n  ".join(fails or [out[-500:]])
            + "\nrebuild it (make appliance) or download it again",
        )
    return out


def read(path: str) -> Ova:
    """Index the archive and parse the descriptor (after check: the format is known good)."""
    members: dict[str, Member] = {}
    try:
        with tarfile.open(path, mode="r:") as tf:
            for ti in tf:
                if ti.isfile():
                    members[ti.name] = Member(ti.name, ti.offset_data, ti.size)
            ovfs = [m for m in members.values() if m.name.endswith(".ovf")]
            if len(ovfs) != 1:
                raise InstallerError(Exit.OVA_INVALID, f"OVA {path}: expected one .ovf descriptor, found {len(ovfs)}")
            if ovfs[0].size > MAX_DESCRIPTOR:
                raise InstallerError(Exit.OVA_INVALID, f"OVA {path}: descriptor larger than {MAX_DESCRIPTOR} bytes")
            f = tf.extractfile(ovfs[0].name)
            if f is None:
                raise InstallerError(Exit.OVA_INVALID, f"OVA {path}: cannot read {ovfs[0].name}")
            descriptor = f.read().decode("utf-8")
    except (tarfile.TarError, OSError, UnicodeDecodeError) as e:
        raise InstallerError(Exit.OVA_INVALID, f"OVA {path}: {e}") from e
    try:
        root = ET.fromstring(descriptor)  # noqa: S314 - checked by cairn-ova first; stdlib expat does not fetch entities
    except ET.ParseError as e:
        raise InstallerError(Exit.OVA_INVALID, f"OVA {path}: descriptor is not XML: {e}") from e
    ns = {"ovf": OVF_NS}
    a = "{" + OVF_NS + "}"
    files = {f.get(a + "id", ""): f.get(a + "href", "") for f in root.iterfind("ovf:References/ovf:File", ns)}
    disks: list[Disk] = []
    for d in root.iterfind("ovf:DiskSection/ovf:Disk", ns):
        href = files.get(d.get(a + "fileRef", ""), "")
        if href not in members:
            raise InstallerError(Exit.OVA_INVALID, f"OVA {path}: disk file {href!r} is not in the archive")
        units = d.get(a + "capacityAllocationUnits", "byte")
        cap = int(d.get(a + "capacity", "0"))
        if units.startswith("byte * 2^"):
            cap <<= int(units.split("^", 1)[1])
        disks.append(Disk(href, members[href].size, cap))
    version = root.findtext("ovf:VirtualSystem/ovf:ProductSection/ovf:Version", default="", namespaces=ns).strip()
    if not version:
        raise InstallerError(Exit.OVA_INVALID, f"OVA {path}: the descriptor names no product version (ProductSection/Version)")
    networks = [n.get(a + "name", "") for n in root.iterfind("ovf:NetworkSection/ovf:Network", ns)]
    return Ova(path, version, descriptor, members, disks, networks)


def template_name(version: str, host: str) -> str:
    """The template of ``version`` on ``host``: one per host, named by version.

    >>> template_name("1.2.3", "esx-01.cairn.test")
    'cairn-svm-1.2.3-esx-01.cairn.test'
    """
    return f"cairn-svm-{version}-{host}"


TEMPLATE_PREFIX = "cairn-svm-"
