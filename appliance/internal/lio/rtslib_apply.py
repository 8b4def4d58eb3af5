"""Apply a Cairn LIO plan with rtslib-fb (run by internal/lio, plan as JSON on stdin).

Input: {"actions": [...], "control": "...", "hw_max_sectors": N, "alua_passthrough": bool,
        "save_file": path or ""}. Each action is one internal/lio Action (see state.go);
actions run in order; the first failure stops the run with exit status 1 and a one-line
message on stderr naming the action. With save_file, the whole LIO configuration is
saved there afterwards (rtslib's saveconfig.json format, restored at boot by
`targetctl restore`).
"""
import json
import sys
import warnings

warnings.simplefilter("ignore")  # rtslib warns about dbroot when devices already exist
import rtslib_fb as rts  # noqa: E402


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
                if req.get("alua_passthrough"):
                    # REPORT TARGET PORT GROUPS reaches Cairn, which answers the same on every SVM
                    so.set_attribute("alua_support", "0")
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
