"""Pure parts of cairn-install: descriptor, thumbprint, address and rate
parsing (input from files, flags and the network: clear errors, never a
traceback), OVA reading."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from cairn_install import ova
from cairn_install.cli import _parse_rate
from cairn_install.errors import Exit, InstallerError
from cairn_install.extension import Descriptor
from cairn_install.vcenter import Target, TlsPolicy, normalize_thumbprint

GOOD = {
    "descriptor_version": 1,
    "key": "com.cairn.vcenter",
    "plugin_version": "0.1.0",
    "company": "Cairn",
    "label": "Cairn",
    "summary": "s",
    "client_type": "vsphere-client-remote",
    "client_url": "https://p:9443/ui/plugin.json",
    "server_url": "https://p:9443/ui/",
    "server_thumbprint": "AA:BB",
    "server_thumbprint_sha256": "ab" * 32,
    "task_types": ["com.cairn.vcenter.deploy"],
    "privileges": [{"id": "Cairn.Monitor", "label": "Monitor", "summary": "See"}, {"id": "Cairn.Operate", "label": "Operate"}],
}


def test_descriptor_privileges_are_registered_with_labels() -> None:
    ext = Descriptor.from_json(GOOD, "x").extension()
    assert [(p.privID, p.privGroupName) for p in ext.privilegeList] == [("Cairn.Monitor", "Cairn"), ("Cairn.Operate", "Cairn")]
    labels = {kv.key: kv.value for kv in ext.resourceList[0].data}
    assert ext.resourceList[0].module == "privilege"
    assert labels["Cairn.label"] == "Cairn" and labels["Cairn.Monitor.label"] == "Monitor" and labels["Cairn.Operate.summary"] == "Operate"
    for bad in ({"id": "NoGroup"}, {"id": ".x"}, "Cairn.Monitor", {"label": "x"}):
        with pytest.raises(InstallerError) as e:
            Descriptor.from_json(dict(GOOD, privileges=[bad]), "x")
        assert e.value.code == Exit.USAGE and "GROUP.NAME" in e.value.message
    assert not Descriptor.from_json({k: v for k, v in GOOD.items() if k != "privileges"}, "x").extension().privilegeList


def test_descriptor_prefers_the_sha256_thumbprint() -> None:
    d = Descriptor.from_json(GOOD, "x")
    assert d.server_thumbprint == ":".join(["AB"] * 32) and d.server_sha256 == "ab" * 32
    ext = d.extension()
    assert ext.client[0].url == GOOD["client_url"] and ext.server[0].serverThumbprint == d.server_thumbprint
    assert Descriptor.from_json(dict(GOOD, server_thumbprint_sha256=""), "x").server_thumbprint == "AA:BB"
    assert ext.server[0].type == "HTTPS"  # descriptor 1
    v2 = dict(GOOD, descriptor_version=2, server_type="MANIFEST_SERVER", server_url=GOOD["client_url"], server_certificate="PEM")
    ext2 = Descriptor.from_json(v2, "x").extension()
    assert (ext2.server[0].type, ext2.server[0].url, ext2.server[0].serverCertificate) == ("MANIFEST_SERVER", GOOD["client_url"], "PEM")


def test_descriptor_of_any_shape_is_a_descriptor_or_a_usage_error() -> None:
    rnd = random.Random(3)
    values: list[object] = [None, 1, "", "x", [], {}, ["a"], True, 2.5]
    with pytest.raises(InstallerError) as e:
        Descriptor.from_json(dict(GOOD, descriptor_version=3), "x")
    assert e.value.code == Exit.USAGE and "upgrade cairn-install" in e.value.message
    for _ in range(500):
        doc = {k: (v if rnd.random() < 0.7 else rnd.choice(values)) for k, v in GOOD.items() if rnd.random() < 0.9}
        try:
            Descriptor.from_json(doc, "x")
        except InstallerError as err:
            assert err.code == Exit.USAGE and err.message.startswith("x: ")
    junk: object
    for junk in (None, [], "x", 3):
        with pytest.raises(InstallerError):
            Descriptor.from_json(junk, "x")


def test_thumbprints_addresses_rates() -> None:
    assert normalize_thumbprint(":".join(["Ab"] * 32)) == "ab" * 32
    for bad in ("ab" * 20, "zz" * 32, ""):
        with pytest.raises(InstallerError) as e:
            normalize_thumbprint(bad)
        assert e.value.code == Exit.USAGE and "openssl" in e.value.message
    assert Target.parse_address("vc:8443") == ("vc", 8443)
    for bad in ("", "ftp://vc", "https://vc:99999/sdk"):
        with pytest.raises(InstallerError):
            Target.parse_address(bad)
    with pytest.raises(InstallerError, match="only one of"):
        TlsPolicy.of("ca.pem", None, True)
    assert (_parse_rate("20M"), _parse_rate("512k"), _parse_rate("1000")) == (20 << 20, 512 << 10, 1000)


def test_reading_something_that_is_not_an_ova(tmp_path: Path) -> None:
    f = tmp_path / "x.ova"
    f.write_bytes(b"not a tar archive" * 100)
    with pytest.raises(InstallerError) as e:
        ova.read(str(f))
    assert e.value.code == Exit.OVA_INVALID
    with pytest.raises(InstallerError) as e:
        ova.check(str(tmp_path / "missing.ova"), "/bin/true")
    assert e.value.code == Exit.USAGE
