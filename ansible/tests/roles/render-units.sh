#!/usr/bin/env bash
# The roles' systemd unit templates (roles/*/templates/*.service.j2) rendered by
# Ansible's own template module, as the roles render them (trim_blocks on), with
# certificates on and off; then every directive of a template must come out as a
# line of its own, in the same order, and cairn-nbd's ExecStart must end with
# --pki DIR exactly when certificates are on. A block tag at the end of a line
# once swallowed the newline after it (trim_blocks): ExecStart ran on into
# "Restart=on-failure", cairn nbd got "--pki /etc/cairn/pki/nbdRestart=on-failure"
# and the unit lost its Restart=. Only the qemu roles test (run.sh) saw it.
#
# Env: none. About 5 s.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
VENV=$ROOT/.venv
ROLES=$ROOT/ansible/ansible_collections/cairn/storage/roles
die() { echo "render-units: $*" >&2; exit 1; }
[ -x "$VENV/bin/ansible-playbook" ] || die "no ansible-playbook in $VENV: run scripts/pydeps.sh"
D=$(mktemp -d /tmp/cairn-render-units.XXXXXX)
trap 'rm -rf "$D"' EXIT

mapfile -t templates < <(find "$ROLES" -path '*/templates/*.service.j2' | sort)
[ ${#templates[@]} -gt 0 ] || die "no unit templates under $ROLES"
cat >"$D/render.yml" <<YAML
- hosts: localhost
  gather_facts: false
  vars:
    cairn_pki_dir: /etc/cairn/pki
    cairn_nbd_host: node1
    cairn_nbd_listen: 127.0.0.1:10809
    cairn_nbd_connect_host: 127.0.0.1
    cairn_nbd_connect_port: 10809
  tasks:
    - name: Render every unit template
      ansible.builtin.template:
        src: "{{ item }}"
        dest: "$D/{{ pki_label }}-{{ item | basename | regex_replace('\\\\.j2\$', '') }}"
        mode: "0644"
      loop: $(printf '%s\n' "${templates[@]}" | python3 -c 'import json, sys; print(json.dumps(sys.stdin.read().split()))')
YAML
for pki in true false; do
	ANSIBLE_NOCOLOR=1 ANSIBLE_LOCALHOST_WARNING=False ANSIBLE_LOCAL_TEMP=$D/tmp \
		"$VENV/bin/ansible-playbook" -i localhost, -c local -e "ansible_python_interpreter=$VENV/bin/python" "$D/render.yml" \
		-e "cairn_pki=$pki pki_label=pki-$pki" >"$D/ansible-$pki.log" 2>&1 ||
		{ cat "$D/ansible-$pki.log" >&2; die "rendering failed (pki $pki)"; }
done

python3 - "$D" "${templates[@]}" <<'EOF'
import re, shlex, sys
from pathlib import Path
d, templates = Path(sys.argv[1]), sys.argv[2:]
directive = re.compile(r"^([A-Z][A-Za-z]*)=")
failed = 0
for t in templates:
    want = [m.group(1) for l in Path(t).read_text().splitlines() if (m := directive.match(l))]
    name = Path(t).name.removesuffix(".j2")
    for pki in ("true", "false"):
        lines = (d / f"pki-{pki}-{name}").read_text().splitlines()
        got = [m.group(1) for l in lines if (m := directive.match(l))]
        if got != want:
            print(f"FAIL {name} (pki {pki}): directives {got}, the template has {want}")
            failed += 1
            continue
        if name == "cairn-nbd.service":
            argv = shlex.split(next(l for l in lines if l.startswith("ExecStart=")).split("=", 1)[1])
            ok = argv[-2:] == ["--pki", "/etc/cairn/pki/nbd"] if pki == "true" else "--pki" not in argv
            if not ok:
                print(f"FAIL {name} (pki {pki}): ExecStart {argv}")
                failed += 1
                continue
        print(f"ok   {name} (pki {pki}): {len(got)} directives, each on its own line")
sys.exit(1 if failed else 0)
EOF
