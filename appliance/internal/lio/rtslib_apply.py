"""Apply a Cairn LIO plan with rtslib-fb (run by internal/lio, plan as JSON on stdin).

Input: {"actions": [...], "control": "...", "hw_max_sectors": N, "save_file": path or ""}.
Each action is one internal/lio Action (see state.go); a backstore's "attributes" are the
kernel attributes it must have (lio.RequiredAttributes), set by configure() before any LUN
exports it. Actions run in order; the first failure stops the run with exit status 1 and a one-line
message on stderr naming the action. With save_file, the whole LIO configuration is
saved there afterwards (rtslib's saveconfig.json format, restored at boot by
`targetctl restore`).
"""
import json
import os
import sys
import warnings

warnings.simplefilter("ignore")  # rtslib warns about dbroot when devices already exist
import rtslib_fb as rts  # noqa: E402


# Why each kernel attribute Cairn sets matters, and what to do when the kernel cannot take it.
ATTRIBUTE_HELP = {
    "alua_support": (
        "REPORT TARGET PORT GROUPS must reach Cairn, which answers the same on every SVM; "
        "LIO's own ALUA emulation answers per SVM. Kernels without the 2020 patch "
        "'scsi: target: make pgr_support and alua_support attributes writable' (Linux 5.8) "
        "keep alua_support read-only: run the SVM on Linux 5.8 or later (the appliance's "
        "Debian 12 and Rocky 9 kernels have it)"),
    "emulate_pr": (
        "persistent reservations must be refused (a reservation taken through one SVM would "
        "not fence another, see docs/vsphere.md); LIO refuses PERSISTENT RESERVE IN/OUT and "
        "RESERVE/RELEASE only with emulate_pr=0, an attribute added in 2020: run the SVM on a "
        "kernel that has it (Linux 5.8 or later)"),
}


def configure(so, attributes):
    """Set the kernel attributes Cairn needs on backstore so, checking first that the kernel
    has them and lets them change (a configfs attribute without a store method is read-only)."""
    for name in sorted(attributes):
        want = attributes[name]
        path = os.path.join(so.path, "attrib", name)
        why = ATTRIBUTE_HELP.get(name, "")
        if not os.path.exists(path):
            raise rts.RTSLibError("this kernel has no %s attribute: %s" % (name, why))
        with open(path) as f:
            have = f.read().strip()
        if have == want:
            continue
        if not os.stat(path).st_mode & 0o200:
            raise rts.RTSLibError("this kernel keeps %s read-only at %s, Cairn needs %s: %s"
                                  % (name, have, want, why))
        so.set_attribute(name, want)


def main():
    req = json.load(sys.stdin)
    root = rts.RTSRoot()
    iscsi = rts.FabricModule("iscsi")

    def backstore(name):
        for so in root.storage_objects:
            if so.plugin == "user" and so.name == name:
                return so
        raise rts.RTSLibError("no user backstore %s" % name)

    def tpg(iqn):
        return rts.TPG(rts.Target(iscsi, iqn, mode="lookup"), 1, mode="lookup")

    def portal(spec):
        host, _, port = spec.rpartition(":")
        return host.strip("[]"), int(port)

    for a in req["actions"]:
        op = a["op"]
        try:
            if op == "create_backstore":
                b = a["backstore"]
                so = rts.UserBackedStorageObject(
                    b["name"], config=b["config"], size=b["size"], wwn=b["serial"] or None,
                    hw_max_sectors=req.get("hw_max_sectors"), control=req.get("control") or None)
                try:
                    # before any LUN exports it, so no initiator sees LIO's own ALUA or PR
                    configure(so, b.get("attributes") or {})
                except Exception:
                    so.delete()  # a refused backstore changes nothing
                    raise
            elif op == "configure_backstore":
                configure(backstore(a["name"]), a["backstore"].get("attributes") or {})
            elif op == "resize_backstore":
                backstore(a["name"]).set_attribute("dev_size", str(a["size"]))
            elif op == "delete_backstore":
                backstore(a["name"]).delete()
            elif op == "ensure_target":
                t = rts.TPG(rts.Target(iscsi, a["iqn"]), 1)
                t.set_attribute("generate_node_acls", "0")  # only ACL'd initiators log in
                t.set_attribute("cache_dynamic_acls", "0")
                t.set_attribute("demo_mode_write_protect", "1")
                t.set_attribute("authentication", "1" if a.get("authentication") else "0")
                t.enable = True
            elif op == "add_portal":
                rts.NetworkPortal(tpg(a["iqn"]), *portal(a["portal"]))
            elif op == "remove_portal":
                rts.NetworkPortal(tpg(a["iqn"]), *portal(a["portal"]), mode="lookup").delete()
            elif op == "add_lun":
                rts.LUN(tpg(a["iqn"]), lun=a["lun"], storage_object=backstore(a["name"]))
            elif op == "remove_lun":
                rts.LUN(tpg(a["iqn"]), lun=a["lun"]).delete()
            elif op in ("add_acl", "set_acl_auth"):
                acl = a["acl"]
                n = rts.NodeACL(tpg(a["iqn"]), acl["initiator"], mode="create" if op == "add_acl" else "lookup")
                n.chap_userid = acl["chap"]["user"]
                n.chap_password = acl["chap"]["secret"]
                n.chap_mutual_userid = acl["mutual"]["user"]
                n.chap_mutual_password = acl["mutual"]["secret"]
            elif op == "remove_acl":
                rts.NodeACL(tpg(a["iqn"]), a["initiator"], mode="lookup").delete()
            elif op == "map_lun":
                n = rts.NodeACL(tpg(a["iqn"]), a["initiator"], mode="lookup")
                m = a["mapped"]
                for old in n.mapped_luns:
                    if old.mapped_lun == a["lun"]:
                        old.delete()
                rts.MappedLUN(n, a["lun"], tpg_lun=m["tpg_lun"], write_protect=m["read_only"])
            elif op == "unmap_lun":
                n = rts.NodeACL(tpg(a["iqn"]), a["initiator"], mode="lookup")
                for old in n.mapped_luns:
                    if old.mapped_lun == a["lun"]:
                        old.delete()
            else:
                raise rts.RTSLibError("unknown action")
        except Exception as e:  # report which action failed, then stop
            redacted = {k: v for k, v in a.items() if k != "acl"}
            print("lio action %s failed: %s (%s)" % (op, e, json.dumps(redacted)), file=sys.stderr)
            sys.exit(1)
    if req.get("save_file"):
        root.save_to_file(req["save_file"])


if __name__ == "__main__":
    main()
