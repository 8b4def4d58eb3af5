"""cairn-install: the command line and the interactive menu.

    cairn-install                      the menu (on a terminal)
    cairn-install register   --vcenter VC --vcenter-user U --plugin-url https://plugin:9443
    cairn-install unregister --vcenter VC --vcenter-user U
    cairn-install upgrade    --vcenter VC --vcenter-user U --plugin-url https://plugin:9443
    cairn-install upload-template --vcenter VC --vcenter-user U --ova cairn-svm-1.2.3.ova [--host H]... [--datastore [H=]DS]...
    cairn-install status     --vcenter VC --vcenter-user U [--json]
    cairn-install deploy     --vcenter VC --vcenter-user U --plugin-url https://plugin:9443 --plan plan.json

The password comes from $CAIRN_VCENTER_PASSWORD, --vcenter-password-file or
a prompt that does not echo; never from the command line (other users can
read a process's arguments). Exit codes: see errors.Exit.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from pyVmomi import vmodl

from . import deploy as deploymod
from . import extension
from . import ova as ovamod
from . import status as statusmod
from . import upload as uploadmod
from .errors import Exit, InstallerError
from .vcenter import Target, TlsPolicy, connect, disconnect, warn_insecure

DEFAULT_KEY = "com.cairn.vcenter"


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def _parse_rate(s: str) -> int:
    """``500K``, ``20M``, ``1G`` or bytes -> bytes/s."""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = s.strip().upper().removesuffix("B").removesuffix("/S")
    try:
        if t and t[-1] in mult:
            return int(float(t[:-1]) * mult[t[-1]])
        return int(t)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{s!r}: give bytes per second, e.g. 20M") from e


def _add_common(p: argparse.ArgumentParser, top: bool) -> None:
    """The connection options, accepted before and after the command.

    Only the top level sets defaults; a subcommand's copy must not reset
    what was given before the command (argparse.SUPPRESS)."""

    def d(v: Any) -> Any:
        return v if top else argparse.SUPPRESS

    vc = p.add_argument_group("vCenter")
    vc.add_argument(
        "--vcenter", default=d(_env("CAIRN_VCENTER")), help="vCenter address: HOST, HOST:PORT or https://HOST/sdk (env CAIRN_VCENTER)"
    )
    vc.add_argument("--vcenter-user", default=d(_env("CAIRN_VCENTER_USER")), help="vCenter user (env CAIRN_VCENTER_USER)")
    vc.add_argument(
        "--vcenter-password-file",
        default=d(None),
        help="file holding the vCenter password (else env CAIRN_VCENTER_PASSWORD, else a prompt)",
    )
    vc.add_argument(
        "--vcenter-ca-file",
        default=d(_env("CAIRN_VCENTER_CA_FILE")),
        help="PEM CA (or certificate) that vCenter's certificate must chain to",
    )
    vc.add_argument(
        "--vcenter-thumbprint", default=d(_env("CAIRN_VCENTER_THUMBPRINT")), help="pin vCenter's certificate by its SHA-256 thumbprint"
    )
    vc.add_argument(
        "--insecure", action="store_true", default=d(False), help="do not verify certificates at all (a warning is printed; test labs only)"
    )
    pl = p.add_argument_group("plugin server")
    pl.add_argument("--plugin-url", default=d(_env("CAIRN_PLUGIN_URL")), help="https://HOST:PORT of cairn-plugin (env CAIRN_PLUGIN_URL)")
    pl.add_argument("--plugin-thumbprint", default=d(_env("CAIRN_PLUGIN_THUMBPRINT")), help="pin the plugin server's certificate (SHA-256)")
    pl.add_argument("--plugin-ca-file", default=d(None), help="PEM CA of the plugin server's certificate")
    p.add_argument("--json", action="store_true", default=d(False), help="print the result as JSON on stdout (progress goes to stderr)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cairn-install",
        description="Register the Cairn vSphere Client plugin, upload the SVM OVA as templates, deploy from a plan.",
        epilog="Without a command on a terminal: the interactive menu. Exit codes: "
        + ", ".join(f"{e.value} {e.name.lower()}" for e in Exit),
    )
    _add_common(p, top=True)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    for name, helptext in (
        ("register", "register the plugin (an existing registration is an error: use upgrade)"),
        ("upgrade", "replace the registration with the plugin server's current descriptor"),
    ):
        sp = sub.add_parser(name, help=helptext)
        _add_common(sp, top=False)
        sp.add_argument("--descriptor", help="register this descriptor JSON file instead of fetching it from --plugin-url")
    sp = sub.add_parser("unregister", help="remove the plugin's registration")
    _add_common(sp, top=False)
    sp.add_argument("--key", default=DEFAULT_KEY, help=f"extension key (default {DEFAULT_KEY})")
    sp = sub.add_parser("status", help="plugin registration and version, templates per host, deployed SVMs")
    _add_common(sp, top=False)
    sp.add_argument("--key", default=DEFAULT_KEY, help=f"extension key (default {DEFAULT_KEY})")
    sp = sub.add_parser("upload-template", aliases=["upload"], help="upload the SVM OVA as a template to hosts' datastores")
    _add_common(sp, top=False)
    sp.add_argument("--ova", required=False, help="the SVM OVA (default: the newest packer/output/*.ova)")
    sp.add_argument("--host", action="append", default=[], help="ESXi host (repeat; default: every connected host)")
    sp.add_argument(
        "--datastore",
        action="append",
        default=[],
        help="DATASTORE for every host, or HOST=DATASTORE (repeat); default: the host's local datastore with the most free space",
    )
    sp.add_argument("--network", help="port group for the SVM's networks (default: the host's first network)")
    sp.add_argument("--disk-provisioning", choices=["thin", "thick"], default="thin")
    sp.add_argument("--limit-rate", type=_parse_rate, default=0, help="upload bandwidth per host, e.g. 20M (bytes/s; default unlimited)")
    sp.add_argument("--parallel", type=int, default=4, help="hosts uploaded at once (default 4)")
    sp.add_argument("--ova-checker", help="the cairn-ova binary (default: on PATH or packer/.work/bin)")
    sp = sub.add_parser("deploy", help="deploy a system from the plan JSON the wizard's review step downloads")
    _add_common(sp, top=False)
    sp.add_argument("--plan", required=False, help="the plan JSON file")
    sp.add_argument("--no-wait", action="store_true", help="start the deployment and return")
    sp.add_argument("--timeout", type=float, default=3600, help="seconds to follow the deployment (default 3600)")
    _add_common(sub.add_parser("menu", help="the interactive menu"), top=False)
    return p


class Session:
    """What the actions need: vCenter target and plugin TLS, asked for once."""

    def __init__(self, args: argparse.Namespace, ask: Callable[[str, str | None], str] | None = None) -> None:
        self.args = args
        self._ask = ask
        self._target: Target | None = None

    def target(self) -> Target:
        if self._target is not None:
            return self._target
        a = self.args
        addr = a.vcenter or self._prompt("vCenter address", None)
        host, port = Target.parse_address(addr or "")
        user = a.vcenter_user or self._prompt("vCenter user", "administrator@vsphere.local") or ""
        if not user:
            raise InstallerError(Exit.USAGE, "no vCenter user: give --vcenter-user (or set CAIRN_VCENTER_USER)")
        password = self._password()
        tls = TlsPolicy.of(a.vcenter_ca_file, a.vcenter_thumbprint, a.insecure)
        self._target = Target(host, port, user, password, tls)
        return self._target

    def plugin_tls(self) -> TlsPolicy:
        a = self.args
        if a.insecure and not (a.plugin_thumbprint or a.plugin_ca_file):
            warn_insecure("the plugin server")
            return TlsPolicy(insecure=True)
        return TlsPolicy.of(a.plugin_ca_file, a.plugin_thumbprint, False)

    def plugin_url(self) -> str:
        u = self.args.plugin_url or self._prompt("Plugin server URL (https://HOST:PORT)", None)
        if not u:
            raise InstallerError(Exit.USAGE, "no plugin server: give --plugin-url https://HOST:PORT (or set CAIRN_PLUGIN_URL)")
        self.args.plugin_url = u
        return u

    def _prompt(self, what: str, default: str | None) -> str | None:
        if self._ask is None:
            return default
        return self._ask(what, default)

    def _password(self) -> str:
        a = self.args
        if a.vcenter_password_file:
            try:
                with open(a.vcenter_password_file, encoding="utf-8") as f:
                    pw = f.readline().rstrip("\r\n")
            except OSError as e:
                raise InstallerError(Exit.USAGE, f"cannot read the password file {a.vcenter_password_file}: {e.strerror}") from e
            if not pw:
                raise InstallerError(Exit.USAGE, f"the password file {a.vcenter_password_file} is empty")
            return pw
        env = os.environ.get("CAIRN_VCENTER_PASSWORD")
        if env:
            return env
        if sys.stdin.isatty():
            typed = getpass.getpass("vCenter password: ")
            if typed:
                return typed
        raise InstallerError(
            Exit.USAGE, "no vCenter password: set CAIRN_VCENTER_PASSWORD, give --vcenter-password-file, or run on a terminal to be asked"
        )


def _descriptor(s: Session) -> extension.Descriptor:
    if getattr(s.args, "descriptor", None):
        return extension.load_descriptor(s.args.descriptor)
    return extension.fetch_descriptor(s.plugin_url(), s.plugin_tls())


def act_register(s: Session) -> dict[str, Any]:
    d = _descriptor(s)
    si = connect(s.target())
    try:
        r = extension.register(si, d)
    finally:
        disconnect(si)
    return {"changed": True, "registration": r.as_dict(), "message": f"registered {r.key} version {r.version} ({r.client_url})"}


def act_upgrade(s: Session) -> dict[str, Any]:
    d = _descriptor(s)
    si = connect(s.target())
    try:
        before, after = extension.upgrade(si, d)
    finally:
        disconnect(si)
    return {
        "changed": before != after,
        "previous": before.as_dict(),
        "registration": after.as_dict(),
        "message": f"upgraded {after.key} from version {before.version} to {after.version}",
    }


def act_unregister(s: Session) -> dict[str, Any]:
    key = getattr(s.args, "key", None) or DEFAULT_KEY
    si = connect(s.target())
    try:
        had = extension.unregister(si, key)
    finally:
        disconnect(si)
    if had is None:
        return {"changed": False, "message": f"{key} is not registered: nothing to do"}
    return {"changed": True, "previous": had.as_dict(), "message": f"unregistered {key} (was version {had.version})"}


def act_status(s: Session) -> dict[str, Any]:
    key = getattr(s.args, "key", None) or DEFAULT_KEY
    si = connect(s.target())
    try:
        st = statusmod.collect(si, key)
    finally:
        disconnect(si)
    return {"changed": False, **st, "message": statusmod.render(st)}


def _default_ova() -> str:
    out = os.path.join(os.path.dirname(__file__), "..", "..", "..", "packer", "output")
    try:
        ovas = sorted((os.path.join(out, f) for f in os.listdir(out) if f.endswith(".ova")), key=os.path.getmtime)
    except OSError:
        ovas = []
    if not ovas:
        raise InstallerError(Exit.USAGE, "no OVA given: pass --ova PATH (build one with 'make appliance')")
    return os.path.normpath(ovas[-1])


def act_upload(s: Session, progress_out: Any = None) -> dict[str, Any]:
    a = s.args
    path = a.ova or _default_ova()
    checker = ovamod.find_checker(a.ova_checker)
    target = s.target()  # ask for credentials before the (long) check
    report = ovamod.check(path, checker)
    o = ovamod.read(path)
    datastores: dict[str, str] = {}
    for d in a.datastore:
        h, sep, ds = d.partition("=")
        if sep:
            datastores[h] = ds
        else:
            datastores["*"] = d
    opts = uploadmod.Options(
        hosts=list(a.host),
        datastores=datastores,
        network=a.network,
        provisioning=a.disk_provisioning,
        limit_rate=a.limit_rate,
        parallel=a.parallel,
    )
    out = progress_out or sys.stderr
    out.write(f"OVA {path}: version {o.version}, cairn-ova check: {report.splitlines()[-1] if report else 'PASS'}\n")
    cancel = threading.Event()
    results = uploadmod.upload(target, o, opts, uploadmod.Progress(out=out), cancel)
    failed = [r for r in results if r.status == "failed"]
    message = "\n".join(f"{r.host}: {r.status}: {r.message}" for r in results)
    doc: dict[str, Any] = {
        "changed": any(r.status == "uploaded" for r in results),
        "version": o.version,
        "ova": path,
        "hosts": [r.as_dict() for r in results],
        "message": message,
    }
    if failed:
        raise _WithResult(
            InstallerError(Exit.FAILED, message + "\nfix the failures above and run upload again (done hosts are skipped)"), doc
        )
    return doc


def act_deploy(s: Session, progress_out: Any = None) -> dict[str, Any]:
    a = s.args
    plan_path = a.plan or (s._prompt("Plan file (JSON from the wizard's review step)", None) if s._ask else None)
    if not plan_path:
        raise InstallerError(Exit.USAGE, "no plan: give --plan FILE (the JSON the deploy wizard's review step downloads)")
    plan = deploymod.load_plan(plan_path)
    url = s.plugin_url()
    tls = s.plugin_tls()
    target = s.target()
    si = connect(target)  # checks the credentials with vCenter first: a clear error for a wrong password
    ps = deploymod.PluginSession(url, tls)
    try:
        ps.login(target.user, target.password)
        deploymod.validate(ps, plan)
        job = deploymod.start(ps, plan)
        if getattr(a, "no_wait", False):
            return {"changed": True, "job": job, "message": f"deployment of {plan['system']} started (job {job['name']})"}
        final = deploymod.follow(ps, job["name"], getattr(a, "timeout", 3600.0), out=progress_out or sys.stderr)
    finally:
        ps.close()
        disconnect(si)
    doc = {"changed": True, "job": final, "message": f"deployment of {plan['system']}: {final.get('state')}"}
    if final.get("state") != "succeeded":
        raise _WithResult(
            InstallerError(
                Exit.FAILED, f"deployment of {plan['system']} failed: {final.get('error', '')}; fix it and run deploy again (it resumes)"
            ),
            doc,
        )
    return doc


class _WithResult(InstallerError):
    """A failure that still has a result document (per-host outcomes)."""

    def __init__(self, e: InstallerError, doc: dict[str, Any]) -> None:
        super().__init__(e.code, e.message)
        self.doc = doc


ACTIONS: dict[str, Callable[[Session], dict[str, Any]]] = {
    "register": act_register,
    "unregister": act_unregister,
    "upgrade": act_upgrade,
    "status": act_status,
    "upload-template": act_upload,
    "upload": act_upload,
    "deploy": act_deploy,
}


def run_action(name: str, s: Session, as_json: bool) -> int:
    try:
        doc = ACTIONS[name](s)
        code = Exit.OK
    except KeyboardInterrupt:
        doc, code = {"message": "interrupted (an upload removes its half-imported templates before it stops)"}, Exit.INTERRUPTED
        doc["error"] = {"code": int(code), "message": doc["message"]}
    except vmodl.MethodFault as e:
        # A vSphere fault no check above foresaw: report it, not a traceback.
        fault = type(e).__name__.rsplit(".", 1)[-1]
        msg = f"vCenter answered {fault}: {getattr(e, 'msg', '') or ''}; check vCenter's tasks and events, then retry"
        doc, code = {"error": {"code": int(Exit.FAILED), "name": "failed", "message": msg}}, Exit.FAILED
    except InstallerError as e:
        doc = dict(getattr(e, "doc", {}))
        doc["error"] = {"code": int(e.code), "name": e.code.name.lower(), "message": e.message}
        code = e.code
    if as_json:
        json.dump({"action": name, "ok": code == Exit.OK, **doc}, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    elif code == Exit.OK:
        print(doc.get("message", "done"))
    else:
        print(f"cairn-install {name}: {doc['error']['message']}", file=sys.stderr)
    return int(code)


MENU = """
Cairn installer
  1  Register the Cairn plugin
  2  Unregister the plugin
  3  Upload the SVM OVA as a template to hosts
  4  Status: registration, templates per host, deployed SVMs
  5  Upgrade the registration
  6  Deploy from a plan file
  0  Quit"""


def menu(args: argparse.Namespace) -> int:
    def ask(what: str, default: str | None) -> str:
        suffix = f" [{default}]" if default else ""
        v = input(f"{what}{suffix}: ").strip()
        return v or (default or "")

    s = Session(args, ask)
    last = 0
    while True:
        print(MENU)
        try:
            choice = input("Choice: ").strip()
        except EOFError:
            return last
        if choice == "0":
            return last
        if choice not in "123456" or len(choice) != 1:
            print(f"{choice!r} is not a choice: type 0-6")
            continue
        try:
            if choice == "3":
                args.ova = args.ova or ask("Path to the SVM OVA", None)
                hosts = ask("Hosts (comma-separated; empty: all connected)", "")
                args.host = [h.strip() for h in hosts.split(",") if h.strip()]
                ds = ask("Datastore (empty: each host's local datastore with the most space)", "")
                args.datastore = [ds] if ds else []
            name = {"1": "register", "2": "unregister", "3": "upload-template", "4": "status", "5": "upgrade", "6": "deploy"}[choice]
            last = run_action(name, s, False)
        except InstallerError as e:
            print(f"error: {e.message}", file=sys.stderr)
            last = int(e.code)
        if last in (Exit.AUTH, Exit.USAGE, Exit.TLS, Exit.UNREACHABLE):
            s._target = None  # ask again next time


def _defaults(args: argparse.Namespace) -> None:
    # Menu actions read options that only their subcommand defines.
    defaults: dict[str, Any] = {
        "descriptor": None,
        "key": DEFAULT_KEY,
        "ova": None,
        "host": [],
        "datastore": [],
        "network": None,
        "disk_provisioning": "thin",
        "limit_rate": 0,
        "parallel": 4,
        "ova_checker": None,
        "plan": None,
        "no_wait": False,
        "timeout": 3600.0,
    }
    for k, v in defaults.items():
        if not hasattr(args, k):
            setattr(args, k, v)


def main(argv: Sequence[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    _defaults(args)
    # Ctrl-C raises KeyboardInterrupt in the main thread (also when Python
    # was started with SIGINT ignored, e.g. in the background of a shell).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    cmd = args.command
    if cmd is None:
        if not sys.stdin.isatty():
            p.print_usage(sys.stderr)
            print("cairn-install: give a command (the menu needs a terminal)", file=sys.stderr)
            return int(Exit.USAGE)
        cmd = "menu"
    if cmd == "menu":
        try:
            return menu(args)
        except KeyboardInterrupt:
            print("\ninterrupted", file=sys.stderr)
            return int(Exit.INTERRUPTED)
    return run_action(cmd, Session(args), args.json)


if __name__ == "__main__":
    sys.exit(main())
