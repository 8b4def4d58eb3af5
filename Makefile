# Cairn — the front door. Each target is a thin call into a component.
SHELL := /bin/bash
export GOFLAGS := -buildvcs=false
DEMO_STATE ?= $(CURDIR)/demo-state
GO_TEST_FLAGS ?= -race -count=1 -timeout 20m
# Go packages tested at once (test-go, test-plugin): 4 on 2 CPUs, since most
# of them wait (etcd, timers, sockets, the simulator's round trips): at go's
# default of 2 the CPUs were 52 % (appliance) and 77 % (plugin) busy, and
# both suites took 1.7x as long (2026-11-30: 315 -> 181 s, 224 -> 129 s).
GO_TEST_PACKAGES ?= 4

.PHONY: all build demo demo-stop screenshots test test-go test-fuzz fuzz test-security test-integration test-chaos test-lio test-lio-full test-e2e \
	test-appliance test-packer test-plugin test-qos test-security test-installer test-ansible test-ansible-roles print-test-suites demo-vsphere bench bench-smoke test-bench clean build-ui test-ui

all: build

build:
	cd appliance && go build -o bin/ ./cmd/...

## demo: install what is missing, build, start a local 3-node cluster, use it over NBD
demo:
	@scripts/deps.sh demo
	@$(MAKE) --no-print-directory build
	@CAIRN_DEMO_STATE=$(DEMO_STATE) scripts/demo.sh

demo-stop:
	@tests/lib/cluster.sh stop $(DEMO_STATE)

## test: the whole default suite (what CI runs); each suite prints its time
# Installs what the suites need first (scripts/deps.sh: only what is missing,
# and it says what); each suite target below also does so for itself alone.
TEST_SUITES ?= test-go test-fuzz test-integration test-plugin test-ui test-installer test-ansible test-packer test-qos test-security test-chaos test-e2e test-lio
test:
	@scripts/deps.sh test
	@scripts/run-suites.sh $(TEST_SUITES)

print-test-suites:
	@echo $(TEST_SUITES)

# failures under fio verify: SDS kill, partition, device errors, MDM quorum,
# maintenance, fault set, ATS linearizability. Each SDS in its own netns. Root.
test-chaos: build
	@scripts/deps.sh chaos
	cd tests/chaos/linearize && go vet ./... && go test -race -count=1 ./...
	tests/chaos/run.sh

# vCenter simulator -> plan -> deploy of 4 SVMs running the real daemons in
# network namespaces -> VMFS datastore on 4 hosts -> rolling maintenance under
# fio verify -> an SVM that does not come back, then resume. Needs root.
# the rogue-client test: an attacker in its own namespace, no credentials or
# the wrong ones, against a cluster in namespaces (authentication on). Root.
test-security: build
	@scripts/deps.sh security
	tests/security/run.sh

test-e2e: build
	@scripts/deps.sh e2e
	tests/e2e/run.sh

test-packer:
	@scripts/deps.sh packer
	$(MAKE) -C packer test

## appliance: the SVM OVA (packer/output/); test-appliance also boots it (CI: when packer/ changed)
appliance: build
	@scripts/deps.sh appliance
	$(MAKE) -C packer appliance CAIRN_BIN_DIR=$(CURDIR)/appliance/bin

test-appliance:
	@scripts/deps.sh appliance
	scripts/appliance-ci.sh

# iSCSI in a qemu guest (Debian's kernel LIO), `cairn target` over a real
# cluster on the host. The default suite runs the VAAI-relevant conformance
# suites; `make test-lio-full` runs libiscsi's ALL and rewrites docs/conformance.md.
LIO_SUITES ?= ALL.Inquiry ALL.CompareAndWrite ALL.ReadCapacity16 ALL.WriteSame10 ALL.WriteSame16 \
	ALL.Unmap ALL.GetLBAStatus ALL.ExtendedCopy ALL.ReceiveCopyResults ALL.SynchronizeCache10 \
	ALL.Read10 ALL.Write10 ALL.MultipathIO
test-lio: build
	@scripts/deps.sh lio
	TESTS="$(LIO_SUITES)" tests/lio/conformance.sh
	tests/lio/ats.sh
	tests/lio/access.sh

test-lio-full: build
	@scripts/deps.sh lio
	TESTS=ALL tests/lio/conformance.sh
	cp $${CAIRN_CACHE:-$$HOME/.cache/cairn}/lio/conformance-run/conformance.md docs/conformance.md

# The plugin server serves the UI from disk (-ui DIR): `make build-ui`
# writes it to ui/dist/cairn-ui/browser/ (docs/ui.md). DEMO_REAL=1 first
# starts (or resumes) the local cluster of `make demo` in DEMO_STATE and
# shows it as a deployed system read from its real gateway (-demo-gateway);
# `make demo-stop` stops it.
demo-vsphere: build-ui
	@if [ "$(DEMO_REAL)" = 1 ]; then \
		scripts/deps.sh demo && $(MAKE) --no-print-directory build && \
		tests/lib/cluster.sh start $(DEMO_STATE) && \
		gw=$$(sed -n 's/^GW_PORT=//p' $(DEMO_STATE)/ports.env) && \
		cd vcenter-plugin && go run ./cmd/cairn-plugin -demo -ui $(CURDIR)/ui/dist/cairn-ui/browser \
			-demo-gateway https://127.0.0.1:$$gw -demo-gateway-cert $(DEMO_STATE)/gateway/cert.pem \
			-demo-gateway-password-file $(DEMO_STATE)/gateway/admin-password; \
	else \
		cd vcenter-plugin && go run ./cmd/cairn-plugin -demo -ui $(CURDIR)/ui/dist/cairn-ui/browser; \
	fi

## build-ui: the vSphere Client plugin UI (Angular + Clarity) into ui/dist/cairn-ui/browser/
build-ui:
	@scripts/deps.sh ui
	cd ui && npx --no-install ng build --configuration production

# UI: lint, type check, unit tests (vitest), production build (size, time,
# initial JS < 1.5 MB), browser tests in Debian's chromium against the
# demo stack with axe-core and screenshots to ui/e2e/out/screenshots/ (the
# work tree stays clean); `make screenshots` runs the same tests and writes
# the committed docs/screenshots/ instead.
test-ui:
	@scripts/deps.sh ui
	ui/scripts/test.sh

screenshots:
	@scripts/deps.sh ui
	CAIRN_SCREENSHOTS=docs ui/scripts/test.sh

test-plugin:
	@scripts/deps.sh plugin
	cd vcenter-plugin && go vet ./... && go test $(GO_TEST_FLAGS) -p $(GO_TEST_PACKAGES) ./...

# cairn-install and the cairn Python client (installer/): ruff, mypy strict,
# pytest against cairn-vcsim + the plugin server and a real local cluster.
test-installer: build
	@scripts/deps.sh installer
	cd vcenter-plugin && go build -o bin/ ./cmd/cairn-vcsim ./cmd/cairn-plugin
	$(MAKE) --no-print-directory -C packer tools
	installer/test.sh

test-go:
	@scripts/deps.sh go
	cd appliance && go vet ./... && CAIRN_TEST_STRICT=1 go test $(GO_TEST_FLAGS) -p $(GO_TEST_PACKAGES) ./...

# every Fuzz* target of the appliance (network and input parsers), 5 s each;
# `make fuzz` runs them 120 s each (FUZZ_SECONDS)
test-fuzz:
	@scripts/deps.sh go
	scripts/fuzz.sh 5

fuzz:
	@scripts/deps.sh go
	scripts/fuzz.sh $(or $(FUZZ_SECONDS),120)

test-integration: build
	@scripts/deps.sh integration
	tests/integration/nbd-fio.sh

# QoS limits (IOPS, bandwidth, live change) and the statistics API, measured
# with fio over NBD on a local 3-SDS cluster (about 2-3 min).
test-qos: build
	@scripts/deps.sh qos
	tests/qos/run.sh
# Ansible collection cairn.storage (ansible/): ansible-test sanity (pinned ansible-core,
# Python 3.11, --local), every module against a real local cluster (check mode leaves the
# etcd revision alone, a second run changes nothing, diff, the gateway's errors), the
# vSphere deployment playbook against the plugin server's -demo (simulated vCenter), and
# the site playbook's cluster configuration against daemons on loopback (NBD at the end), and
# the common role's firewall rules loaded into network namespaces (root).
test-ansible: build
	@scripts/deps.sh ansible
	@s=$$(date +%s); ansible/tests/sanity.sh && ansible/tests/roles/render-units.sh && ansible/tests/roles/firewall.sh && ansible/tests/integration/run.sh && ansible/tests/integration/vsphere.sh && \
	ansible/tests/roles/configure-local.sh; \
	rc=$$?; echo "test-ansible: $$(($$(date +%s) - s)) s"; exit $$rc

# The roles for real: three Debian 12 guests in qemu (TCG) built by the site playbook into a
# cluster that serves a volume over NBD (checked from the host). Heavy (three TCG guests);
# not in TEST_SUITES; its end-to-end time is still to be measured (docs/ansible.md).
test-ansible-roles: build
	@scripts/deps.sh ansible-roles
	flock /tmp/cairn-heavy.lock ansible/tests/roles/run.sh

## bench: the full comparison (< 40 min), written to docs/benchmarks.{md,json} and plots
bench: build
	@scripts/deps.sh bench
	tests/bench/run.sh full --docs

bench-smoke: build
	@scripts/deps.sh bench
	tests/bench/run.sh smoke

# the benchmark harness's own tests (stand-in targets; needs tgt)
test-bench:
	@scripts/deps.sh bench
	tests/bench/selftest.sh

clean:
	rm -rf appliance/bin
