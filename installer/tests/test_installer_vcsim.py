"""cairn-install against the simulated vCenter (cairn-vcsim) and the real plugin
server: every action and every failure case, asserting vCenter's state after
each with a pyVmomi session of the test's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest

from cairn._http import Session
from cairn_install import upload as uploadmod
from cairn_install.errors import Exit
from cairn_install.vcenter import disconnect
from conftest import OVA, Plugin, VCSim, make_ova

KEY = "com.cairn.vcenter"


def cli(vc: VCSim, *args: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run the real console script (python -m cairn_install), no terminal."""
    return subprocess.run(
        [sys.executable, "-m", "cairn_install", *args],
        env=env if env is not None else vc.env(CAIRN_VCENTER_CA_FILE=vc.cert),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def cli_json(vc: VCSim, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    r = cli(vc, "--json", *args, env=env)
    try:
        return r.returncode, json.loads(r.stdout)
    except ValueError as e:
        raise AssertionError(f"not JSON (rc {r.returncode}): {r.stdout!r} {r.stderr!r}") from e


def extension_of(vc: VCSim) -> Any:
    si: Any = vc.si()
    try:
        return si.content.extensionManager.FindExtension(KEY)
    finally:
        disconnect(si)


def api_version(vc: VCSim) -> tuple[int, ...]:
    si: Any = vc.si()
    try:
        return tuple(int(x) for x in si.content.about.apiVersion.split(".") if x.isdigit())
    finally:
        disconnect(si)


def vm_state(vc: VCSim) -> list[tuple[str, bool, str]]:
    """(name, is template, host) of every VM, sorted."""
    si: Any = vc.si()
    try:
        return sorted((v.name, v.template, v.host) for v in uploadmod.vms(si.content))
    finally:
        disconnect(si)


# --- status, connection and TLS failures --------------------------------------------------------


def test_status_json_on_an_empty_vcenter(vcsim: VCSim) -> None:
    rc, doc = cli_json(vcsim, "status")
    assert rc == 0, doc
    assert doc["ok"] and doc["registration"] is None and doc["svms"] == []
    assert doc["templates"] == {f"esx-0{i}.cairn.test": [] for i in range(1, 5)}


def test_wrong_credentials_is_exit_3_and_says_what_to_do(vcsim: VCSim) -> None:
    r = cli(vcsim, "status", env=vcsim.env(CAIRN_VCENTER_CA_FILE=vcsim.cert, CAIRN_VCENTER_PASSWORD="not-the-password"))
    assert r.returncode == Exit.AUTH, r.stderr
    assert "wrong user name or password" in r.stderr and "not-the-password" not in r.stderr + r.stdout


def test_unreachable_vcenter_is_exit_4(vcsim: VCSim) -> None:
    from conftest import free_port

    r = cli(vcsim, "status", "--vcenter", f"https://127.0.0.1:{free_port()}/sdk")
    assert r.returncode == Exit.UNREACHABLE, r.stderr
    assert "cannot reach vCenter" in r.stderr and "check the address" in r.stderr


def test_certificate_verified_pinned_or_skipped_with_a_warning(vcsim: VCSim) -> None:
    env = vcsim.env()  # no CA file: the simulator's self-signed certificate is not trusted
    r = cli(vcsim, "status", env=env)
    assert r.returncode == Exit.TLS and vcsim.sha256 in r.stderr, r.stderr  # tells the thumbprint to pin
    r = cli(vcsim, "status", "--vcenter-thumbprint", vcsim.sha256, env=env)
    assert r.returncode == 0, r.stderr
    wrong = ("00" if not vcsim.sha256.startswith("00") else "11") + vcsim.sha256[2:]
    r = cli(vcsim, "status", "--vcenter-thumbprint", wrong, env=env)
    assert r.returncode == Exit.TLS and "not the pinned" in r.stderr, r.stderr
    r = cli(vcsim, "status", "--insecure", env=env)
    assert r.returncode == 0 and "WARNING: not verifying" in r.stderr, r.stderr
    r = cli(vcsim, "status", "--insecure", "--vcenter-thumbprint", vcsim.sha256, env=env)
    assert r.returncode == Exit.USAGE


# --- register, upgrade, unregister ---------------------------------------------------------------


def test_register_upgrade_unregister(vcsim: VCSim, plugin: Plugin, tmp_path: Path) -> None:
    import requests

    descriptor = requests.get(plugin.url + "/api/v1/extension", verify=plugin.cert, timeout=30).json()
    # Not trusting the plugin server's certificate: refused, nothing registered.
    r = cli(vcsim, "register", "--plugin-url", plugin.url)
    assert r.returncode == Exit.TLS and plugin.sha256 in r.stderr, r.stderr
    assert extension_of(vcsim) is None

    rc, doc = cli_json(vcsim, "register", "--plugin-url", plugin.url, "--plugin-thumbprint", plugin.sha256)
    assert rc == 0 and doc["changed"], doc
    ext = extension_of(vcsim)
    assert ext.key == KEY and ext.version == descriptor["plugin_version"] and ext.company == descriptor["company"]
    assert ext.description.label == descriptor["label"]
    assert [(c.type, c.url) for c in ext.client] == [("vsphere-client-remote", descriptor["client_url"])]
    assert ext.client[0].url.endswith("/plugin.json")
    server_type = descriptor.get("server_type", "HTTPS")  # descriptor 1: HTTPS; 2: MANIFEST_SERVER
    assert [(s.type, s.url, s.serverThumbprint) for s in ext.server] == [(server_type, descriptor["server_url"], plugin.sha256)]
    if descriptor.get("server_certificate") and api_version(vcsim) >= (8, 0, 2):
        # vCenter 8.0.2 added the PEM certificate (the simulator is older and drops it)
        assert ext.server[0].serverCertificate == descriptor["server_certificate"]
    assert sorted(t.taskID for t in ext.taskList) == sorted(descriptor["task_types"])
    assert sorted(p.privID for p in ext.privilegeList) == sorted(p["id"] for p in descriptor.get("privileges", []))

    # An existing registration is an error and changes nothing.
    r = cli(vcsim, "register", "--plugin-url", plugin.url, "--plugin-ca-file", plugin.cert)
    assert r.returncode == Exit.EXISTS and "upgrade" in r.stderr, r.stderr
    assert extension_of(vcsim).version == descriptor["plugin_version"]

    # Upgrade replaces it (a newer descriptor, from a file).
    newer = dict(descriptor, plugin_version="0.2.0-test", client_url=descriptor["client_url"].replace("/ui/", "/ui2/"))
    f = tmp_path / "descriptor.json"
    f.write_text(json.dumps(newer))
    rc, doc = cli_json(vcsim, "upgrade", "--descriptor", str(f))
    assert rc == 0 and doc["previous"]["version"] == descriptor["plugin_version"] and doc["registration"]["version"] == "0.2.0-test"
    ext = extension_of(vcsim)
    assert ext.version == "0.2.0-test" and ext.client[0].url == newer["client_url"]

    rc, doc = cli_json(vcsim, "unregister")
    assert rc == 0 and doc["changed"] and extension_of(vcsim) is None
    rc, doc = cli_json(vcsim, "unregister")
    assert rc == 0 and not doc["changed"]  # nothing to do is not an error
    r = cli(vcsim, "upgrade", "--descriptor", str(f))
    assert r.returncode == Exit.NOT_REGISTERED and extension_of(vcsim) is None


def test_register_refuses_a_bad_descriptor_file(vcsim: VCSim, tmp_path: Path) -> None:
    f = tmp_path / "d.json"
    f.write_text(json.dumps({"descriptor_version": 1, "key": KEY}))
    r = cli(vcsim, "register", "--descriptor", str(f))
    assert r.returncode == Exit.USAGE and "the extension descriptor has no '" in r.stderr, r.stderr
    assert extension_of(vcsim) is None


# --- upload --------------------------------------------------------------------------------------


def test_upload_to_chosen_hosts_then_the_rest_skipping_done_ones(vcsim: VCSim, svm_ova: OVA) -> None:
    hosts = ["esx-01.cairn.test", "esx-03.cairn.test"]
    rc, doc = cli_json(vcsim, "upload-template", "--ova", svm_ova.path, "--host", hosts[0], "--host", hosts[1])
    assert rc == 0, doc
    assert [(h["host"], h["status"], h["datastore"]) for h in doc["hosts"]] == [
        (hosts[0], "uploaded", "esx-01-local"),
        (hosts[1], "uploaded", "esx-03-local"),
    ]
    t = f"cairn-svm-{svm_ova.version}-"
    assert vm_state(vcsim) == [(t + h, True, h) for h in hosts]

    rc, doc = cli_json(vcsim, "upload-template", "--ova", svm_ova.path)
    assert rc == 0, doc
    assert {h["host"]: h["status"] for h in doc["hosts"]} == {
        "esx-01.cairn.test": "skipped",
        "esx-02.cairn.test": "uploaded",
        "esx-03.cairn.test": "skipped",
        "esx-04.cairn.test": "uploaded",
    }
    all_hosts = [f"esx-0{i}.cairn.test" for i in range(1, 5)]
    assert vm_state(vcsim) == [(t + h, True, h) for h in all_hosts]
    rc, st = cli_json(vcsim, "status")
    assert st["templates"] == {h: [{"name": t + h, "version": svm_ova.version}] for h in all_hosts}


def test_upload_refuses_an_ova_that_fails_the_check(vcsim: VCSim, svm_ova: OVA, tmp_path: Path) -> None:
    bad = tmp_path / "bad.ova"
    data = bytearray(Path(svm_ova.path).read_bytes()[: 4 << 20] if svm_ova.kind.startswith("real") else Path(svm_ova.path).read_bytes())
    data[-2048] ^= 0xFF  # corrupt the disk's end-of-stream marker / manifest hash
    bad.write_bytes(bytes(data))
    r = cli(vcsim, "upload-template", "--ova", str(bad))
    assert r.returncode == Exit.OVA_INVALID, r.stderr
    assert "fails cairn-ova check" in r.stderr and "FAIL" in r.stderr
    assert vm_state(vcsim) == []


def test_upload_refuses_a_host_without_enough_space(vcsim: VCSim, tmp_path: Path) -> None:
    # A disk of 1.1 TiB capacity (sparse: small on disk) does not fit thick on the 1 TiB local datastores.
    big = make_ova(tmp_path, "9.9.2-big", disk_bytes=1100 << 30)
    r = cli(vcsim, "upload-template", "--ova", big, "--host", "esx-02.cairn.test", "--disk-provisioning", "thick")
    assert r.returncode == Exit.NO_SPACE, r.stderr
    assert "esx-02-local on host esx-02.cairn.test has 1024.00 GiB free" in r.stderr and "--datastore" in r.stderr
    assert vm_state(vcsim) == []
    r = cli(vcsim, "upload-template", "--ova", big, "--host", "esx-02.cairn.test", "--datastore", "no-such-ds")
    assert r.returncode == Exit.USAGE and "no accessible datastore 'no-such-ds'" in r.stderr
    assert vm_state(vcsim) == []


@pytest.fixture(scope="module")
def slow_ova(tmp_path_factory: pytest.TempPathFactory) -> str:
    """16 MiB of incompressible disk: with --limit-rate 2M an upload takes ~8 s."""
    return make_ova(tmp_path_factory.mktemp("slow"), "9.9.3-slow", random_mib=16)


def test_upload_failure_removes_the_half_imported_vm(vcsim: VCSim, slow_ova: str) -> None:
    """An admin terminates the installer's vCenter session mid-upload: the lease keep-alive
    fails, the upload stops, and the half-imported VM is removed through a new session."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cairn_install",
            "--json",
            "upload-template",
            "--ova",
            slow_ova,
            "--host",
            "esx-04.cairn.test",
            "--limit-rate",
            "2M",
        ],
        env=vcsim.env(CAIRN_VCENTER_CA_FILE=vcsim.cert),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        si: Any = vcsim.si()
        try:
            deadline = time.monotonic() + 60
            while not any(n.startswith("cairn-svm-9.9.3-slow") for n, _, _ in vm_state(vcsim)):
                assert time.monotonic() < deadline and proc.poll() is None, "the import never started"
                time.sleep(0.2)
            mine = si.content.sessionManager.currentSession.key
            others = [s for s in si.content.sessionManager.sessionList if s.key != mine]
            assert others, "no installer session to terminate"
            si.content.sessionManager.TerminateSession([s.key for s in others])
        finally:
            disconnect(si)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == Exit.FAILED, err
    doc = json.loads(out)
    (h,) = doc["hosts"]
    assert h["status"] == "failed" and h["cleaned_up"], h
    assert vm_state(vcsim) == []  # nothing half-imported


def test_ctrl_c_during_upload_removes_the_half_imported_vm(vcsim: VCSim, slow_ova: str) -> None:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "cairn_install", "upload-template", "--ova", slow_ova, "--host", "esx-02.cairn.test", "--limit-rate", "2M"],
        env=vcsim.env(CAIRN_VCENTER_CA_FILE=vcsim.cert),
        encoding="utf-8",
        timeout=90,
    )
    try:
        child.expect(r"esx-02 \[#+ *\] +\d+%")  # the progress bar on the terminal
        child.sendintr()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == Exit.INTERRUPTED, child.before
    assert "interrupted" in (child.before or "")
    assert vm_state(vcsim) == []


# --- the menu, through a pseudo-terminal ---------------------------------------------------------


def test_menu_with_password_prompt_registers_and_shows_status(vcsim: VCSim, plugin: Plugin, svm_ova: OVA) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["CAIRN_OVA_CHECKER"] = vcsim.env()["CAIRN_OVA_CHECKER"]
    child = pexpect.spawn(
        sys.executable,
        ["-m", "cairn_install", "--vcenter-ca-file", vcsim.cert, "--plugin-ca-file", plugin.cert],
        env=env,
        encoding="utf-8",
        timeout=120,
    )
    try:
        child.expect("Choice: ")
        child.sendline("1")
        child.expect(r"Plugin server URL \(https://HOST:PORT\): ")
        child.sendline(plugin.url)
        child.expect("vCenter address: ")
        child.sendline(vcsim.url)
        child.expect(r"vCenter user \[administrator@vsphere.local\]: ")
        child.sendline(vcsim.user)
        child.expect("vCenter password: ")
        child.setecho(False)
        child.sendline(vcsim.password)
        child.expect("registered com.cairn.vcenter")
        assert vcsim.password not in (child.before or "")  # never echoed
        child.expect("Choice: ")
        child.sendline("3")  # credentials are not asked again
        child.expect("Path to the SVM OVA: ")
        child.sendline(svm_ova.path)
        child.expect(r"Hosts \(comma-separated; empty: all connected\): ")
        child.sendline("esx-01.cairn.test")
        child.expect(r"Datastore .*: ")
        child.sendline("")
        child.expect("esx-01.cairn.test: uploaded")
        child.expect("Choice: ")
        child.sendline("4")
        child.expect("Plugin: registered, version")
        child.expect(f"cairn-svm-{svm_ova.version}-esx-01.cairn.test")
        child.expect("Choice: ")
        child.sendline("7")
        child.expect("not a choice")
        child.expect("Choice: ")
        child.sendline("0")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert extension_of(vcsim) is not None
    t = f"cairn-svm-{svm_ova.version}-esx-01.cairn.test"
    assert vm_state(vcsim) == [(t, True, "esx-01.cairn.test")]


def test_no_command_without_a_terminal_is_a_usage_error(vcsim: VCSim) -> None:
    r = cli(vcsim)
    assert r.returncode == Exit.USAGE and "needs a terminal" in r.stderr


# --- deploy from a plan --------------------------------------------------------------------------


def test_deploy_refuses_an_invalid_plan_and_starts_nothing(vcsim: VCSim, plugin: Plugin, tmp_path: Path) -> None:
    # A plan as the wizard downloads it, from the plugin server's own suggestion,
    # naming a template that vCenter does not have.
    s = Session()  # requests' env CA bundle would override a plain Session's verify
    s.verify = plugin.cert
    assert s.post(plugin.url + "/api/v1/session", json={"username": vcsim.user, "password": vcsim.password}, timeout=60).status_code == 200
    r = s.post(
        plugin.url + "/api/v1/plan/suggest",
        json={
            "datacenter": "DC0",
            "system": "lab",
            "template": "cairn-svm-missing",
            "svm_cidr": "10.20.0.0/24",
            "iscsi_cidr": "10.30.0.0/24",
        },
        timeout=60,
    )
    assert r.status_code == 200, r.text
    plan = r.json()
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(plan))
    r2 = cli(vcsim, "deploy", "--plan", str(f), "--plugin-url", plugin.url, "--plugin-ca-file", plugin.cert)
    assert r2.returncode == Exit.USAGE, r2.stderr
    assert "not valid for this vCenter" in r2.stderr and "cairn-svm-missing" in r2.stderr
    jobs = s.get(plugin.url + "/api/v1/jobs", timeout=30).json()
    assert jobs == []  # nothing started

    f.write_text("{not json")
    r3 = cli(vcsim, "deploy", "--plan", str(f), "--plugin-url", plugin.url, "--plugin-ca-file", plugin.cert)
    assert r3.returncode == Exit.USAGE and "is not JSON" in r3.stderr


def test_deploy_starts_the_plugin_servers_job_and_follows_it(vcsim: VCSim, plugin: Plugin, tmp_path: Path, svm_ova: OVA) -> None:
    # Registering the plugin registers its privileges (Cairn.Administer, which
    # deploying needs): the documented order is register, upload, deploy.
    reg = cli(vcsim, "register", "--plugin-url", plugin.url, "--plugin-ca-file", plugin.cert)
    assert reg.returncode == 0, reg.stderr
    try:
        _deploy_and_follow(vcsim, plugin, tmp_path, svm_ova)
    finally:
        cli(vcsim, "unregister")


def _deploy_and_follow(vcsim: VCSim, plugin: Plugin, tmp_path: Path, svm_ova: OVA) -> None:
    t = f"cairn-svm-{svm_ova.version}-esx-01.cairn.test"
    rc, doc = cli_json(vcsim, "upload-template", "--ova", svm_ova.path, "--host", "esx-01.cairn.test")
    assert rc == 0, doc
    s = Session()  # requests' env CA bundle would override a plain Session's verify
    s.verify = plugin.cert
    assert s.post(plugin.url + "/api/v1/session", json={"username": vcsim.user, "password": vcsim.password}, timeout=60).status_code == 200
    r = s.post(
        plugin.url + "/api/v1/plan/suggest",
        json={"datacenter": "DC0", "system": "lab", "template": t, "svm_cidr": "10.20.0.0/24", "iscsi_cidr": "10.30.0.0/24"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    f = tmp_path / "plan.json"
    f.write_text(r.text)
    out = cli(vcsim, "deploy", "--plan", str(f), "--plugin-url", plugin.url, "--plugin-ca-file", plugin.cert, "--no-wait")
    assert out.returncode == 0, out.stderr
    assert "deployment of lab started" in out.stdout
    jobs = s.get(plugin.url + "/api/v1/jobs", timeout=30).json()
    assert [j["name"] for j in jobs] == ["deploy:lab"], jobs


def test_deploy_follows_the_job_to_the_end(tmp_path: Path) -> None:
    """`cairn-plugin -demo` (its own simulated vCenter with the SVM template and an
    in-memory Cairn): a plan from the wizard's suggestion is deployed and followed."""
    import re

    from cairn_install.vcenter import colon_hex, server_sha256
    from conftest import PLUGIN_BIN, free_port, need, stop, wait_port

    exe = need(PLUGIN_BIN / "cairn-plugin", "build it with: cd vcenter-plugin && go build -o bin/ ./cmd/cairn-plugin")
    port = free_port()
    out = tmp_path / "demo.out"
    with open(out, "wb") as f:
        demo = subprocess.Popen(
            [str(exe), "-demo", "-listen", f"127.0.0.1:{port}"], stdout=f, stderr=subprocess.DEVNULL, start_new_session=True
        )
    try:
        wait_port(port, 60, "cairn-plugin -demo", demo)
        text = out.read_text()
        m = re.search(
            r"certificate: (\S+) .*simulated vCenter: (https://\S+)\s+sign in to the UI as (\S+) with the password in (\S+)", text, re.S
        )
        if m:
            cert, vc_url, user, pwfile = m.groups()
            password = Path(pwfile).read_text().strip()
        else:  # the older demo printed the password itself
            m = re.search(r"certificate: (\S+) .*simulated vCenter: (https://\S+) \(user (\S+), password (\S+)\)", text, re.S)
            assert m, text
            cert, vc_url, user, password = m.groups()
        plugin_url = f"https://127.0.0.1:{port}"
        s = Session()
        s.verify = cert
        assert s.post(plugin_url + "/api/v1/session", json={"username": user, "password": password}, timeout=60).status_code == 200
        r = s.post(
            plugin_url + "/api/v1/plan/suggest",
            json={"datacenter": "DC0", "system": "lab", "template": "cairn-svm", "svm_cidr": "10.20.0.0/24", "iscsi_cidr": "10.30.0.0/24"},
            timeout=60,
        )
        assert r.status_code == 200, r.text
        plan = tmp_path / "plan.json"
        plan.write_text(r.text)
        vc_port = int(vc_url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
        env.update(CAIRN_VCENTER=vc_url, CAIRN_VCENTER_USER=user, CAIRN_VCENTER_PASSWORD=password)
        pin = colon_hex(server_sha256("127.0.0.1", vc_port))
        args = ["--vcenter-thumbprint", pin, "--plugin-ca-file", cert, "--plugin-url", plugin_url]
        d = subprocess.run(
            [sys.executable, "-m", "cairn_install", "deploy", "--plan", str(plan), "--timeout", "300", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
            check=False,
        )
        assert d.returncode == 0, d.stderr[-3000:]
        assert "deployment of lab: succeeded" in d.stdout
        assert "[deploy] system lab deployed" in d.stderr  # the job's progress events were shown
        st = subprocess.run(
            [sys.executable, "-m", "cairn_install", "--json", "status", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        svms = json.loads(st.stdout)["svms"]
        assert len(svms) == 4 and {x["power_state"] for x in svms} == {"poweredOn"}, svms
    finally:
        stop(demo)
