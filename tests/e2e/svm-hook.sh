#!/usr/bin/env bash
# The "guest" of a simulated Cairn SVM: vcsimkit.CommandHooks runs
#   svm-hook.sh start   when the SVM powers on  (prints guestinfo.* lines once it serves)
#   svm-hook.sh stop    when it powers off      (stops its daemons)
# with CAIRN_SVM_* in the environment (see vcsimkit/commandhooks.go).
#
# The SVM is a network namespace E2E_PREFIX-<octet> (created on first boot,
# plugged into the harness's bridge in E2E_PREFIX-hub) holding the
# address of the vApp property cairn.mgmt.address. Its daemons follow
# cairn.roles: mdm -> `cairn mdm` (embedded etcd, peers from
# cairn.cluster.mdm_members), gateway -> `cairn gateway` (its admin password
# set to cairn.gateway.admin_password, as firstboot would), sds -> `cairn
# sds` named sds-<short host name> (deploy.SDSName). Its RDMs are files
# E2E_STATE/svm/<vm>/disks/<naa>.img (the e2e's deploy.Engine.DevicePath).
#
# Fault injection: while E2E_STATE/fail-boot/<esxi host> exists, start
# fails (the SVM does not boot).
#
# Harness environment: E2E_STATE (state dir), E2E_PREFIX (namespace
# prefix), CAIRN_BIN (appliance/bin), E2E_DEVICE_SIZE (default 2G).
set -euo pipefail

: "${E2E_STATE:?}" "${E2E_PREFIX:?}" "${CAIRN_BIN:?}" "${CAIRN_SVM_NAME:?}" "${CAIRN_SVM_HOST:?}"
CAIRN=$CAIRN_BIN/cairn
CTL=$CAIRN_BIN/cairnctl
MDM_CLIENT_PORT=2379 MDM_PEER_PORT=2380 GW_PORT=8443 SDS_PORT=7100

die() { echo "svm-hook $CAIRN_SVM_NAME: $*" >&2; exit 1; }

ADDR=${CAIRN_SVM_PROP_CAIRN_MGMT_ADDRESS:?the SVM has no cairn.mgmt.address}
IP=${ADDR%/*}
OCTET=${IP##*.}
NS=$E2E_PREFIX-$OCTET
HUB=$E2E_PREFIX-hub
DIR=$E2E_STATE/svm/$CAIRN_SVM_NAME
mkdir -p "$DIR/pids" "$DIR/logs" "$DIR/disks"
short=${CAIRN_SVM_HOST%%.*}
ROLES=",${CAIRN_SVM_PROP_CAIRN_ROLES:-},"

mdm_name() { echo "mdm-${1//./-}"; }
MDM_URLS= INITIAL=
IFS=, read -r -a members <<<"${CAIRN_SVM_PROP_CAIRN_CLUSTER_MDM_MEMBERS:-}"
for m in "${members[@]}"; do
	[ -n "$m" ] || continue
	MDM_URLS+="${MDM_URLS:+,}http://$m:$MDM_CLIENT_PORT"
	INITIAL+="${INITIAL:+,}$(mdm_name "$m")=http://$m:$MDM_PEER_PORT"
done

alive() {
	local st
	[ -f "$1" ] || return 1
	st=$(awk '{ print $3 }' "/proc/$(cat "$1")/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

spawn() { # name command...
	local name=$1; shift
	alive "$DIR/pids/$name.pid" && return 0
	setsid ip netns exec "$NS" "$@" >>"$DIR/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$DIR/pids/$name.pid"
}

wait_port() { # port seconds name
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		if ip netns exec "$NS" bash -c "exec 3<>/dev/tcp/$IP/$1" 2>/dev/null; then return 0; fi
		alive "$DIR/pids/$3.pid" || die "$3 exited while starting: $(tail -n 3 "$DIR/logs/$3.log" 2>/dev/null | tr '\n' ' ')"
		sleep 0.1
	done
	die "$3 did not listen on $IP:$1 within $2 s (see $DIR/logs/$3.log)"
}

stop_daemons() {
	local f pid n
	for f in "$DIR"/pids/*.pid; do
		[ -e "$f" ] || continue
		kill -TERM "$(cat "$f")" 2>/dev/null || true
	done
	for f in "$DIR"/pids/*.pid; do
		[ -e "$f" ] || continue
		pid=$(cat "$f")
		for ((n = 0; n < 100; n++)); do alive "$f" || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$f"
	done
}

# ensure_netns creates the SVM's namespace and plugs it into the bridge.
ensure_netns() {
	[ -e "/run/netns/$NS" ] && return 0
	ip netns add "$NS"
	ip -n "$NS" link set lo up
	ip -n "$HUB" link add "s$OCTET" type veth peer name eth0 netns "$NS"
	ip -n "$HUB" link set "s$OCTET" master br0 up
	ip -n "$NS" addr add "$ADDR" dev eth0
	ip -n "$NS" link set eth0 up
}

start() {
	if [ -e "$E2E_STATE/fail-boot/$CAIRN_SVM_HOST" ]; then
		stop_daemons
		die "injected failure: the SVM on $CAIRN_SVM_HOST does not boot"
	fi
	ensure_netns
	# A reset runs start again without stop: start from a clean slate.
	stop_daemons
	local naa
	for naa in ${CAIRN_SVM_RDMS:-}; do
		[ -f "$DIR/disks/$naa.img" ] || truncate -s "${E2E_DEVICE_SIZE:-2G}" "$DIR/disks/$naa.img"
	done
	if [[ $ROLES == *,mdm,* || $ROLES == *,tiebreaker,* ]]; then
		local tb=()
		[[ $ROLES == *,tiebreaker,* ]] && tb=(--tie-breaker)
		spawn mdm "$CAIRN" mdm --name "$(mdm_name "$IP")" --data-dir "$DIR/mdm" \
			--client-url "http://$IP:$MDM_CLIENT_PORT" --peer-url "http://$IP:$MDM_PEER_PORT" \
			--initial-cluster "$INITIAL" "${tb[@]}"
		wait_port "$MDM_CLIENT_PORT" 30 mdm
	fi
	local info=()
	if [[ $ROLES == *,gateway,* ]]; then
		spawn gateway "$CAIRN" gateway --mdm "$MDM_URLS" --listen "$IP:$GW_PORT" --state-dir "$DIR/gateway"
		wait_port "$GW_PORT" 60 gateway
		set_admin_password
		local tp
		tp=$(openssl x509 -in "$DIR/gateway/cert.pem" -outform der | sha256sum | cut -d' ' -f1)
		info+=("guestinfo.cairn.tls.thumbprint=$tp")
	fi
	if [[ $ROLES == *,sds,* ]]; then
		spawn sds "$CAIRN" sds --mdm "$MDM_URLS" --name "sds-$short" --listen "$IP:$SDS_PORT" --state-dir "$DIR/sds"
		sleep 0.5
		alive "$DIR/pids/sds.pid" || die "sds exited while starting: $(tail -n 3 "$DIR/logs/sds.log" | tr '\n' ' ')"
	fi
	printf '%s\n' "${info[@]}" "guestinfo.cairn.ready=ready"
}

# set_admin_password does what the appliance's firstboot would do with the
# (proposed) vApp property cairn.gateway.admin_password: the gateway
# generated a random first password; replace it with the plan's.
set_admin_password() {
	local want=${CAIRN_SVM_PROP_CAIRN_GATEWAY_ADMIN_PASSWORD:-}
	[ -n "$want" ] || return 0
	[ -f "$DIR/gateway/.admin-password-set" ] && return 0
	local i
	for ((i = 0; i < 300; i++)); do [ -s "$DIR/gateway/admin-password" ] && break; sleep 0.1; done
	[ -s "$DIR/gateway/admin-password" ] || die "the gateway wrote no admin password (see $DIR/logs/gateway.log)"
	(umask 077; printf '%s\n' "$want" >"$DIR/plan-password")
	export CAIRNCTL_CONFIG=$DIR/cairnctl.json
	for ((i = 0; i < 30; i++)); do
		ip netns exec "$NS" "$CTL" login --url "https://$IP:$GW_PORT" --ca-file "$DIR/gateway/cert.pem" \
			--user admin --password-file "$DIR/gateway/admin-password" >/dev/null 2>"$DIR/logs/cairnctl.err" && break
		sleep 0.5
	done
	ip netns exec "$NS" "$CTL" user update admin --password-file "$DIR/plan-password" >/dev/null 2>>"$DIR/logs/cairnctl.err" ||
		die "cannot set the admin password: $(cat "$DIR/logs/cairnctl.err")"
	rm -f "$DIR/plan-password" "$DIR/cairnctl.json"
	touch "$DIR/gateway/.admin-password-set"
}

case ${1:-} in
start) start ;;
stop) stop_daemons ;;
*) die "usage: svm-hook.sh start|stop" ;;
esac
