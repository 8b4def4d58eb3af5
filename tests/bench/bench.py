#!/usr/bin/python3
"""Cairn benchmark core: runs one fio job with CPU accounting, and writes the report.

run.sh owns the targets (start, stop, engine arguments); this file owns what is
measured and how it is reported, so every target is measured the same way:

  bench.py workloads SUITE            names of the workloads of a suite, in order
  bench.py job [options] -- ENGINE... run one workload against one target and
                                      append its record to OUT/records.jsonl
  bench.py add-record OUT JSON        append a record made elsewhere (copy rate,
                                      failure figures from a hook)
  bench.py report OUT DEST            benchmarks.json, benchmarks.md and the PNG
                                      plots (gnuplot) from OUT/records.jsonl into DEST

Record fields (benchmarks.json is a list of them):
  kind          "measurement" (a fio job), "ratio" (computed from two
                measurements of the same run), "figure" (a single number such as
                a copy rate or a failure-detection time), "fill"
  target        raw | nbdkit-file | ceph-rbd | cairn-nbd | cairn-colocated | lio-fileio |
                cairn-iscsi | cairn
  workload      e.g. randread-4k-qd32; scaling runs add -sdsN
  iops          read+write I/Os per second over the measured runtime
  mbps          read+write MB/s (10^6 bytes per second)
  mean_lat_us   mean total latency (submission to completion), microseconds;
                for mixed jobs weighted by the I/O count of each direction
  p99_lat_us    99th percentile of total latency; for mixed jobs the larger of
                the read and write percentiles
  cpu_us_per_io CPU time per I/O in microseconds: fio's own user+system time
                (utime+stime of fio's process tree, all threads, e.g. librbd's)
                plus the utime+stime of every server process, both sampled from
                /proc/PID/stat and taken over fio's measured window (found
                from the first line of fio's IOPS log), divided by the I/Os
                completed in it. Split in client_cpu_us_per_io and
                server_cpu_us_per_io; fio_thread_cpu_us_per_io is fio's own
                usr+sys figure (job thread only), for comparison.
  page_cache_gib, file_refaults_per_io
                the page cache when the job started, and the file pages the
                kernel read again during it after dropping them (reclaim, or a
                DAMON pageout of idle pages), machine-wide, per I/O
  wake_cross_us, wake_same_us
                the machine's price of a wake-up, timed just before the job
                (wake_probe): the mean round trip between two processes over
                two pipes, one on each of two CPUs, and both on one CPU.

Only the Python standard library is used (Debian's /usr/bin/python3).
"""

import argparse
import bisect
import datetime
import glob
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS_FILE = os.path.join(HERE, "workloads.conf")
HZ = os.sysconf("SC_CLK_TCK")

# Options every job gets, whatever the target. The measured window excludes
# ramp_time (fio resets its statistics, CPU usage included, when ramp ends).
# norandommap + randrepeat=0: random offsets are not tracked (no map overhead)
# and not identical between runs. lat_percentiles: percentiles of total latency.
COMMON_FIO_ARGS = [
    "--numjobs=1",
    "--group_reporting=1",
    "--norandommap=1",
    "--randrepeat=0",
    "--lat_percentiles=1",
    "--output-format=json",
]

TARGET_ORDER = ["raw", "nbdkit-file", "ceph-rbd", "cairn-nbd", "cairn-colocated", "lio-fileio", "tcmu-runner", "tcmu-rbd", "cairn-iscsi", "cairn",
                "cairn-nbd-none", "cairn-nbd-authenticated", "cairn-nbd-secure"]

# the targets served from the qemu guest (TCG): their scale is not comparable with the host's
ISCSI_TARGETS = ("lio-fileio", "tcmu-runner", "tcmu-rbd", "cairn-iscsi")
# How the guest's `cairn target` reached the host's cluster (run.sh records
# BENCH_GUEST_NET in meta.json; tests/lio/bench-hook.sh). Runs before the key
# existed took qemu's user net.
ISCSI_NET = {
    "slirp": "through qemu's user net (guestfwd, tests/lio/relay.c; no offloads)",
    "tap": ("through a second virtio NIC on a tap device in the cluster's network namespace "
            "(checksum and segmentation offloads, as a VM's NIC has; the iSCSI traffic between fio and "
            "every target still takes qemu's user net)"),
}

# The goals the issues set, as (target, versus, workload, metric, op, goal).
# "op" says how the ratio target/versus must compare with the goal.
RATIO_GOALS = [
    ("cairn-nbd", "ceph-rbd", "randwrite-4k-qd32", "iops", ">=", 5.0),
    ("cairn-nbd", "ceph-rbd", "randread-4k-qd32", "iops", ">=", 2.5),
    ("cairn-nbd", "nbdkit-file", "randread-4k-qd32", "iops", ">=", 0.6),
    ("cairn-nbd", "ceph-rbd", "randread-4k-qd32", "cpu_us_per_io", "<=", 0.5),
    # issue 18 (speed, part 2): mirrored writes, QD1 latency, the production mix
    ("cairn-nbd", "nbdkit-file", "randwrite-4k-qd32", "iops", ">=", 0.6),
    ("cairn-nbd", "nbdkit-file", "randwrite-4k-qd1", "mean_lat_us", "<=", 3.0),
    ("cairn-nbd", "nbdkit-file", "randread-4k-qd1", "mean_lat_us", "<=", 2.0),
    ("cairn-nbd", "nbdkit-file", "randrw-64k32k-mix45-qd16", "iops", ">=", 0.6),
    ("cairn-nbd", "ceph-rbd", "randwrite-4k-qd32", "cpu_us_per_io", "<=", 0.12),
    # the same four against nbdkit-file with the NBD server in an SDS's process (cairn colocate,
    # opt-in): what serving a third of the chunks without a hop buys
] + [("cairn-colocated", "nbdkit-file", w, m, op, g) for w, m, op, g in (
    ("randwrite-4k-qd32", "iops", ">=", 0.6), ("randwrite-4k-qd1", "mean_lat_us", "<=", 3.0),
    ("randread-4k-qd1", "mean_lat_us", "<=", 2.0), ("randrw-64k32k-mix45-qd16", "iops", ">=", 0.6))]
# issue 18: Cairn's TCMU path against its real peer in the same guest (the ring and TCG
# cancel out) and against LIO's in-kernel fileio
RATIO_GOALS += [("cairn-iscsi", versus, w, "iops", ">=", goal)
     for versus, goal in (("tcmu-runner", 1.0), ("lio-fileio", 0.5))
     for w in ("randread-4k-qd1", "randread-4k-qd16", "randwrite-4k-qd16", "randrw-64k32k-mix45-qd16")]
# Goals on one measurement's own figure: (target, workload, metric, op, goal).
ABSOLUTE_GOALS = [
    ("cairn-nbd", "randwrite-4k-qd32", "cpu_us_per_io", "<=", 50.0),   # issue 18: CPU per mirrored 4k write
]
# Data-path security (issue 19): CPU per I/O of each mode over the same run's
# mode none (the data path before authentication), averaged over the rounds;
# authenticated must stay within 10 %, secure is reported beside it.
SECURITY_MODES = ["none", "authenticated", "secure"]
SECURITY_CPU_GOAL = {"authenticated": 1.10}
# Scaling 1 -> 4 SDSs: max/min CPU per I/O over the SDS counts.
SCALING_CPU_SPREAD_GOAL = 1.2
# Where the time goes: for each goal (target, workload, metric; "*" for any),
# the subsection of the page's hand-written "Where the time goes" section that
# says what costs the time, by the start of its heading. The goals table links
# to it; test_bench checks that every one names a heading of docs/benchmarks.md.
WHY = [
    ("cairn-colocated", "*", "*", "One process for a frontend and an SDS"),
    ("cairn-iscsi", "*", "*", "iSCSI (cairn-iscsi, tcmu-runner, lio-fileio in the same guest)"),
    ("cairn-nbd", "randread-4k-qd32", "iops", "Small reads on one connection"),
    ("cairn-nbd", "randread-4k-qd32", "cpu_us_per_io", "Small reads on one connection"),
    ("cairn-nbd", "randread-4k-qd1", "mean_lat_us", "Cross-CPU wake-ups"),
    ("cairn-nbd", "randwrite-4k-qd1", "mean_lat_us", "Per-hop latency at QD1"),
    ("cairn-nbd", "randwrite-4k-qd32", "*", "The durable device writes: half of a mirrored write"),
    ("cairn-nbd", "randrw-64k32k-mix45-qd16", "iops", "The mixed job and writes at QD32 beside nbdkit-file"),
    ("cairn-nbd", "scaling-*", "*", "Scaling: why CPU per I/O grows with the SDS count"),
    ("cairn-nbd-authenticated", "*", "*", "Data-path security: authenticated against none"),
]


def anchor(heading):
    """The fragment a Markdown renderer (GitHub's rule) gives a heading."""
    h = "".join(ch for ch in heading.strip().lower() if ch.isalnum() or ch in " -_")
    return h.replace(" ", "-")


def why_heading(goal, headings):
    """The heading (of headings) that explains goal, or None."""
    for target, workload, metric, start in WHY:
        if target != goal["target"] or (metric != "*" and metric != goal["metric"].split(" ")[0].rstrip(",")):
            continue
        if workload == "*" or workload == goal["workload"] or (
                workload.endswith("*") and goal["workload"].startswith(workload[:-1])):
            return next((h for h in headings if h.startswith(start)), None)
    return None


def why_headings(page):
    """The ### headings of page's "Where the time goes" section."""
    sec = page.split("\n## Where the time goes", 1)
    if len(sec) < 2:
        return []
    body = sec[1].split("\n## ", 1)[0]
    return [line[4:].strip() for line in body.split("\n") if line.startswith("### ")]


# Figures from the failure hook (issue 3): workload -> (field, op, goal).
FIGURE_GOALS = {
    "failure-detection": ("seconds", "<", 5.0),
    "failure-io-pause": ("seconds", "<", 10.0),
    "rebuild": ("ratio_to_raw", ">=", 0.5),
}


def die(msg):
    print(f"bench.py: {msg}", file=sys.stderr)
    sys.exit(1)


# ---------------------------------------------------------------- workloads


def load_workloads():
    """Return [(name, suites:set, fio_args:list)] in file order."""
    out = []
    with open(WORKLOADS_FILE) as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) < 3 or not all(p.startswith("--") for p in parts[2:]):
                die(f"{WORKLOADS_FILE}:{lineno}: want 'name suites --fio-opt...', got {line!r}")
            out.append((parts[0], set(parts[1].split(",")), parts[2:]))
    return out


# Jobs run once per target over the whole region before the measured ones;
# recorded with their own kind, never as measurements.
UNMEASURED = ("fill", "warm")


def workload_args(name):
    for n, _, args in load_workloads():
        if n == name:
            return args
    die(f"unknown workload {name!r}: see {WORKLOADS_FILE}")


def cmd_workloads(a):
    names = [n for n, suites, _ in load_workloads() if a.suite in suites]
    if not names:
        die(f"no workload in suite {a.suite!r}: see {WORKLOADS_FILE}")
    print("\n".join(names))


# ---------------------------------------------------------------- CPU sampling


def stat_ticks(text):
    """utime+stime (fields 14 and 15) of a /proc/PID/stat line, in clock ticks."""
    # comm (field 2) may hold spaces and parentheses: split after the last ')'.
    rest = text[text.rindex(")") + 2 :].split()
    return int(rest[11]) + int(rest[12])


def proc_ticks(pid):
    """utime+stime of a process (all its threads), in clock ticks; None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return stat_ticks(f.read())
    except OSError:
        return None


def system_ticks():
    """(busy, total) ticks of the whole machine from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]  # idle + iowait
    total = sum(v[:8])  # user nice system idle iowait irq softirq steal
    return total - idle, total


def descendants(pid):
    """pid and all its descendants (via /proc/PID/task/TID/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


class CPUSampler:
    """Samples CPU ticks of the servers, of fio, and of the machine while a job runs.

    Owned by cmd_job: started once fio is spawned, stopped after it exits.
    Samples are interpolated over fio's measured window afterwards, so the CPU
    counted is that of the same seconds fio counted I/Os in (ramp excluded).
    The client side is fio's whole process tree, all threads: fio's own usr/sys
    figures cover only the job thread (RUSAGE_THREAD) and would miss e.g.
    librbd's messenger threads. A process that exits keeps its last sample
    (the kernel moves its time to the parent's cutime, which is not counted).
    """

    SERVER, CLIENT, BUSY, TOTAL = 1, 2, 3, 4  # columns of a sample

    def __init__(self, server_pids, client_root=None, interval=0.1):
        self.server_pids = server_pids
        self.client_root = client_root
        self.interval = interval
        self.samples = []  # (time, server_ticks, client_ticks, sys_busy, sys_total)
        self.last_server = {}
        self.last_client = {}
        self.vanished = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self):
        t = time.time()
        for p in self.server_pids:
            v = proc_ticks(p)
            if v is None:
                self.vanished.add(p)
            else:
                self.last_server[p] = v
        if self.client_root:
            for p in descendants(self.client_root):
                v = proc_ticks(p)
                if v is not None:
                    self.last_client[p] = v
        busy, tot = system_ticks()
        self.samples.append((t, sum(self.last_server.values()), sum(self.last_client.values()), busy, tot))

    def _loop(self):
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def start(self):
        self._sample()
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join()
        self._sample()

    def at(self, t, idx):
        """Linear interpolation of sample column idx at time t (clamped)."""
        times = [s[0] for s in self.samples]
        i = bisect.bisect_left(times, t)
        if i <= 0:
            return self.samples[0][idx]
        if i >= len(times):
            return self.samples[-1][idx]
        s0, s1 = self.samples[i - 1], self.samples[i]
        if s1[0] == s0[0]:
            return s0[idx]
        return s0[idx] + (s1[idx] - s0[idx]) * (t - s0[0]) / (s1[0] - s0[0])

    def delta(self, start, end, idx):
        return self.at(end, idx) - self.at(start, idx)


# ---------------------------------------------------------------- one job


# fio's IOPS log, one line per WINDOW_LOG_MS of the measured window (ramp
# excluded) stamped with the wall clock (log_unix_epoch): it anchors the CPU
# window. fio's own timestamp_ms is taken when it prints its report, after
# the engine's teardown (an NBD disconnect, a librbd shutdown): under load
# that came more than a 1 s job's runtime after its last I/O, and the CPU
# window held none of the job's I/O (cpu_us_per_io 0.0).
WINDOW_LOG_MS = 250


def window_log_args(base):
    return [f"--write_iops_log={base}", f"--log_avg_msec={WINDOW_LOG_MS}", "--log_unix_epoch=1"]


def window_start(base):
    """Wall-clock start (seconds) of fio's measured window, from the first
    line of its IOPS log (written WINDOW_LOG_MS after the window began);
    None without a usable log."""
    first = None
    for path in glob.glob(glob.escape(base) + "_iops.*.log"):
        with open(path) as f:
            line = f.readline()
        try:
            t = int(line.split(",")[0])
        except (ValueError, IndexError):
            continue
        first = t if first is None else min(first, t)
    return None if first is None else (first - WINDOW_LOG_MS) / 1000.0


def summarize(fio_json, sampler, window_end, start=None):
    """Turn fio's JSON and the CPU samples into a record (without labels).
    The CPU window is fio's runtime from start (window_start) if known, else
    the runtime before window_end."""
    job = fio_json["jobs"][0]
    if job.get("error"):
        raise RuntimeError(f"fio reported error {job['error']}")
    dirs = [job[d] for d in ("read", "write", "trim") if job[d]["total_ios"] > 0]
    if not dirs:
        raise RuntimeError("fio completed no I/O")
    ios = sum(d["total_ios"] for d in dirs)
    runtime_s = job["job_runtime"] / 1000.0
    iops = sum(d["iops"] for d in dirs)
    mbps = sum(d["bw_bytes"] for d in dirs) / 1e6
    mean_ns = sum(d["lat_ns"]["mean"] * d["total_ios"] for d in dirs) / ios
    p99s = [d["lat_ns"].get("percentile", {}).get("99.000000") for d in dirs]
    p99_ns = max(p for p in p99s if p is not None) if any(p is not None for p in p99s) else None
    # fio's own figure (job thread only), kept for comparison
    fio_thread_cpu_s = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * runtime_s
    if start is None:
        start = window_end - runtime_s
    else:
        window_end = start + runtime_s
    client_cpu_s = sampler.delta(start, window_end, sampler.CLIENT) / HZ
    server_cpu_s = sampler.delta(start, window_end, sampler.SERVER) / HZ
    busy = sampler.delta(start, window_end, sampler.BUSY)
    total = sampler.delta(start, window_end, sampler.TOTAL)
    rec = {
        "iops": round(iops, 1),
        "mbps": round(mbps, 2),
        "mean_lat_us": round(mean_ns / 1000.0, 1),
        "p99_lat_us": round(p99_ns / 1000.0, 1) if p99_ns is not None else None,
        "cpu_us_per_io": round((client_cpu_s + server_cpu_s) / ios * 1e6, 2),
        "client_cpu_us_per_io": round(client_cpu_s / ios * 1e6, 2),
        "server_cpu_us_per_io": round(server_cpu_s / ios * 1e6, 2),
        "fio_thread_cpu_us_per_io": round(fio_thread_cpu_s / ios * 1e6, 2),
        "ios": ios,
        "runtime_s": runtime_s,
        "system_busy_pct": round(100.0 * busy / total * os.cpu_count(), 1) if total else None,
    }
    if job["read"]["total_ios"] and job["write"]["total_ios"]:
        rec["read_iops"] = round(job["read"]["iops"], 1)
        rec["write_iops"] = round(job["write"]["iops"], 1)
    return rec


def run_fio(cmd, timeout, err_path, server_pids):
    """Run fio in its own process group while sampling CPU; kill the whole
    group on timeout or when interrupted. Returns (fio JSON, sampler)."""
    with open(err_path, "w") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        sampler = CPUSampler(server_pids, client_root=p.pid)
        sampler.start()
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise RuntimeError(f"fio did not finish within {timeout} s (killed)")
        except BaseException:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise
        finally:
            sampler.stop()
    if p.returncode != 0:
        raise RuntimeError(f"fio exited with status {p.returncode}")
    # fio may print warnings before the JSON document.
    text = out.decode(errors="replace")
    return json.loads(text[text.index("{") :]), sampler


# ------------------------------------------------------------ the wake-up price

WAKE_ROUNDS = 2000
WAKE_WARMUP = 200


def wake_round_trip(cpus, rounds=WAKE_ROUNDS):
    """Mean µs of one round trip between this process, on cpus[0], and a child, on cpus[1],
    over two pipes: each round trip is two wake-ups. On one CPU a wake-up is a context
    switch; across two it is also an inter-processor interrupt and, in a VM, often a halted
    vCPU that the hypervisor must resume. Cairn's hand-offs between processes pay that
    price (docs/benchmarks.md, "Cross-CPU wake-ups"), and it moves with the host and the
    hour: recorded before every job, it tells a slow machine from a slow build. The
    caller's CPU affinity is restored."""
    allowed = os.sched_getaffinity(0)
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: echo every byte back, then leave without cleanup handlers
        try:
            os.close(to_child_w)
            os.close(to_parent_r)
            os.sched_setaffinity(0, {cpus[1]})
            for _ in range(WAKE_WARMUP + rounds):
                if not os.read(to_child_r, 1):
                    break  # the parent gave up
                os.write(to_parent_w, b"x")
        finally:
            os._exit(0)
    os.close(to_child_r)
    os.close(to_parent_w)
    try:
        os.sched_setaffinity(0, {cpus[0]})
        for _ in range(WAKE_WARMUP):
            os.write(to_child_w, b"x")
            os.read(to_parent_r, 1)
        t0 = time.perf_counter()
        for _ in range(rounds):
            os.write(to_child_w, b"x")
            os.read(to_parent_r, 1)
        return round((time.perf_counter() - t0) / rounds * 1e6, 1)
    finally:
        os.sched_setaffinity(0, allowed)
        os.close(to_child_w)  # a child still reading sees end of file and leaves
        os.close(to_parent_r)
        os.waitpid(pid, 0)


def wake_probe(rounds=WAKE_ROUNDS):
    """{"wake_cross_us", "wake_same_us"}: wake_round_trip across the first two CPUs this
    process may use (None with only one) and on the first one."""
    cpus = sorted(os.sched_getaffinity(0))
    cross = wake_round_trip((cpus[0], cpus[1]), rounds) if len(cpus) > 1 else None
    return {"wake_cross_us": cross, "wake_same_us": wake_round_trip((cpus[0], cpus[0]), rounds)}


def page_cache_state():
    """(page cache in GiB, file pages refaulted since boot): /proc/meminfo's Cached and
    /proc/vmstat's workingset_refault_file (a page read again from the disk after the kernel
    dropped it, by reclaim or by a DAMON pageout). None for what this kernel does not give."""
    cached = refaults = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("Cached:"):
                    cached = round(int(line.split()[1]) / 1024 / 1024, 2)
        with open("/proc/vmstat") as f:
            for line in f:
                k, _, v = line.partition(" ")
                if k == "workingset_refault_file":
                    refaults = int(v)
    except (OSError, ValueError):
        pass
    return cached, refaults


def cmd_job(a):
    unmeasured = a.workload in UNMEASURED  # once over the region, not timed
    cmd = [a.fio, f"--name={a.workload}", f"--size={a.size_mib}m"] + COMMON_FIO_ARGS
    fio_dir = os.path.join(a.out, "fio", a.target)
    os.makedirs(fio_dir, exist_ok=True)
    name = a.workload + (f"-sds{a.sds}" if a.sds else "") + (f"-r{a.round}" if a.round else "")
    base = os.path.join(fio_dir, name)
    if not unmeasured:
        cmd += ["--time_based=1", f"--runtime={a.runtime}", f"--ramp_time={a.ramp}"] + window_log_args(base)
    cmd += workload_args(a.workload) + a.engine
    timeout = a.timeout or (a.runtime + a.ramp + 60 if not unmeasured else 600)
    with open(base + ".cmd", "w") as f:
        f.write(" ".join(cmd) + "\n")

    pids = [int(p) for p in a.pids.split()] if a.pids else []
    wake = {} if unmeasured else wake_probe()
    cached, refaults0 = page_cache_state()
    try:
        res, sampler = run_fio(cmd, timeout, base + ".err", pids)
    except (RuntimeError, ValueError) as e:
        tail = open(base + ".err").read()[-1500:]
        die(f"{a.target} {name}: {e}\n--- fio stderr (tail) ---\n{tail}\n"
            f"--- command: {base}.cmd; check that the target is up and the engine is available")
    with open(base + ".json", "w") as f:
        json.dump(res, f, indent=1)
    try:
        rec = summarize(res, sampler, res["timestamp_ms"] / 1000.0, window_start(base))
    except RuntimeError as e:
        die(f"{a.target} {name}: {e}; fio output: {base}.json")
    if sampler.vanished:
        die(f"{a.target} {name}: server process(es) {sorted(sampler.vanished)} exited during the job; "
            f"look at the target's logs")
    record = {"kind": a.workload if unmeasured else "measurement", "target": a.target, "workload": name}
    record.update(rec)
    record.update(wake)
    refaults1 = page_cache_state()[1]
    if cached is not None:
        record["page_cache_gib"] = cached
    if refaults0 is not None and refaults1 is not None and rec["ios"]:
        # machine-wide, warm-up included: pages some target had cached, dropped, and read again
        record["file_refaults_per_io"] = round((refaults1 - refaults0) / rec["ios"], 3)
    if a.sds:
        record["sds"] = a.sds
    if a.round:
        record["round"] = a.round
    append_record(a.out, record)
    p99 = f"{rec['p99_lat_us']:.0f}" if rec["p99_lat_us"] is not None else "-"
    print(f"  {a.target:12s} {name:28s} {rec['iops']:10.0f} IOPS {rec['mbps']:8.1f} MB/s "
          f"lat {rec['mean_lat_us']:8.0f}/{p99:>6s} us  cpu {rec['cpu_us_per_io']:6.1f} us/IO "
          f"(fio {rec['client_cpu_us_per_io']:.1f} + server {rec['server_cpu_us_per_io']:.1f})"
          f"  wake-up {fmt(wake.get('wake_cross_us'))}/{fmt(wake.get('wake_same_us'), 1)} us",
          flush=True)


def append_record(out, record):
    with open(os.path.join(out, "records.jsonl"), "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


def cmd_add_record(a):
    try:
        rec = json.loads(a.json)
    except ValueError as e:
        die(f"add-record: not JSON ({e}): {a.json!r}")
    if not isinstance(rec, dict) or "target" not in rec or "workload" not in rec:
        die(f"add-record: want an object with target and workload, got {a.json!r}")
    rec.setdefault("kind", "figure")
    append_record(a.out, rec)


# ---------------------------------------------------------------- report


def read_records(out):
    path = os.path.join(out, "records.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def compare(value, op, goal):
    return {">=": value >= goal, "<=": value <= goal, "<": value < goal, ">": value > goal}[op]


def compute_ratios(records):
    """Ratio records for every goal whose two measurements exist in this run."""
    meas = {(r["target"], r["workload"]): r for r in records if r["kind"] == "measurement"}
    out = []
    for target, versus, workload, metric, op, goal in RATIO_GOALS:
        a, b = meas.get((target, workload)), meas.get((versus, workload))
        if not a or not b or not b.get(metric) or a.get(metric) is None:
            continue
        ratio = a[metric] / b[metric]
        out.append({"kind": "ratio", "target": target, "versus": versus, "workload": workload,
                    "metric": metric, "ratio": round(ratio, 3), "goal": f"{op} {goal:g}",
                    "met": compare(ratio, op, goal)})
    for target, workload, metric, op, goal in ABSOLUTE_GOALS:
        a = meas.get((target, workload))
        if a and a.get(metric) is not None:
            out.append({"kind": "ratio", "target": target, "versus": "-", "workload": workload,
                        "metric": metric + " (absolute)", "ratio": a[metric], "goal": f"{op} {goal:g}",
                        "met": compare(a[metric], op, goal)})
    # Scaling: CPU per I/O spread across SDS counts (each count's mean over
    # the rounds), per workload.
    for base, counts in sorted(scaling_means(records).items()):
        cpus = [m["cpu_us_per_io"] for m in counts.values()]
        if len(counts) < 2 or min(cpus) <= 0:
            continue
        spread = max(cpus) / min(cpus)
        rounds = min(m["rounds"] for m in counts.values())
        out.append({"kind": "ratio", "target": "cairn-nbd", "versus": "cairn-nbd",
                    "workload": f"scaling-{base}", "metric": "cpu_us_per_io max/min over SDS counts "
                    + ",".join(str(n) for n in sorted(counts))
                    + (f", mean of {rounds} rounds" if rounds > 1 else ""),
                    "ratio": round(spread, 3), "goal": f"<= {SCALING_CPU_SPREAD_GOAL:g}",
                    "met": spread <= SCALING_CPU_SPREAD_GOAL})
    # Security modes: mean CPU per I/O over the rounds, each mode over none.
    for w, modes in sorted(security_means(records).items()):
        base = modes.get("none")
        for mode, goal in SECURITY_CPU_GOAL.items():
            if base and mode in modes and base["cpu_us_per_io"] > 0:
                ratio = modes[mode]["cpu_us_per_io"] / base["cpu_us_per_io"]
                out.append({"kind": "ratio", "target": f"cairn-nbd-{mode}", "versus": "cairn-nbd-none",
                            "workload": w, "metric": f"cpu_us_per_io, mean of {modes[mode]['rounds']} rounds",
                            "ratio": round(ratio, 3), "goal": f"<= {goal:g}", "met": ratio <= goal})
    # Rebuild rate relative to the raw copy rate of the same run.
    raw_copy = next((r for r in records if r["target"] == "raw" and r["workload"] == "copy-1m"), None)
    for r in records:
        if r["workload"] == "rebuild" and raw_copy and r.get("mbps"):
            ratio = round(r["mbps"] / raw_copy["mbps"], 3)
            if "ratio_to_raw" not in r:
                r["ratio_to_raw"] = ratio
            elif abs(r["ratio_to_raw"] - ratio) > 0.005:
                # the hook measured its own raw rate: show both, the goal uses the hook's
                r["ratio_to_bench_raw"] = ratio
    for r in records:
        g = FIGURE_GOALS.get(r["workload"])
        if g and r.get(g[0]) is not None:
            r["goal"] = f"{g[0]} {g[1]} {g[2]:g}"
            r["met"] = compare(r[g[0]], g[1], g[2])
    return out


MEAN_FIELDS = ("iops", "cpu_us_per_io", "client_cpu_us_per_io", "server_cpu_us_per_io", "mean_lat_us",
               "system_busy_pct")


def mean_of(rs):
    """The mean of each MEAN_FIELDS figure over measurements rs (None where one lacks it), their
    count as "rounds" and each one's CPU per I/O in round order as "cpus"."""
    m = {k: (sum(r[k] for r in rs) / len(rs) if all(r.get(k) is not None for r in rs) else None)
         for k in MEAN_FIELDS}
    m["rounds"] = len(rs)
    m["cpus"] = [r["cpu_us_per_io"] for r in sorted(rs, key=lambda r: r.get("round") or 0)]
    return m


def base_workload(name):
    """A measurement's workload without the scaling (-sdsN) and round (-rN) suffixes."""
    for suffix in ("-r", "-sds"):
        head, sep, tail = name.rpartition(suffix)
        if sep and tail.isdigit():
            name = head
    return name


def scaling_means(records):
    """{workload: {SDS count: mean_of(its rounds)}}: the scaling run's measurements (one per
    round, or a single one when the run had one round)."""
    acc = {}
    for r in records:
        if r["kind"] == "measurement" and r.get("sds"):
            acc.setdefault(base_workload(r["workload"]), {}).setdefault(r["sds"], []).append(r)
    return {w: {n: mean_of(rs) for n, rs in counts.items()} for w, counts in acc.items()}


def security_means(records):
    """{workload: {mode: {"iops", "cpu_us_per_io", "mean_lat_us", "rounds"}}}: the security run's
    measurements averaged over its rounds."""
    acc = {}
    for r in records:
        if r["kind"] != "measurement" or not r.get("round") or not r["target"].startswith("cairn-nbd-"):
            continue
        mode = r["target"][len("cairn-nbd-"):]
        acc.setdefault(base_workload(r["workload"]), {}).setdefault(mode, []).append(r)
    return {w: {mode: mean_of(rs) for mode, rs in modes.items()} for w, modes in acc.items()}


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def damon_schemes(root="/sys/kernel/mm/damon/admin"):
    """The kernel's DAMON schemes that run (e.g. proactive reclaim set up by the hypervisor's
    image): one line each, "" when there are none. A pageout scheme drops page-cache pages
    idle for a while, so a target's cached reads can turn into device reads mid-run."""
    def read(*parts):
        with open(os.path.join(*parts)) as f:
            return f.read().strip()
    out = []
    for sch in sorted(glob.glob(os.path.join(root, "kdamonds", "[0-9]*", "contexts", "[0-9]*", "schemes", "[0-9]*"))):
        ctx = os.path.dirname(os.path.dirname(sch))
        kd = os.path.dirname(os.path.dirname(ctx))
        try:
            if read(kd, "state") != "on":
                continue
            age_s = int(read(sch, "access_pattern", "age", "min")) * int(read(ctx, "monitoring_attrs", "intervals", "aggr_us")) / 1e6
            quota = int(read(sch, "quotas", "bytes"))
            out.append(f"kdamond {os.path.basename(kd)}: {read(sch, 'action')} of {read(ctx, 'operations')} regions "
                       f"idle for {age_s:g} s or more"
                       + (f", at most {quota >> 20} MiB per {read(sch, 'quotas', 'reset_interval_ms')} ms" if quota else ""))
        except (OSError, ValueError):
            continue
    return "; ".join(out)


def cpu_idle(root="/sys"):
    """How an idle CPU waits, which sets the price of waking it: "" when the kernel does not
    say. In a KVM guest with the haltpoll cpuidle driver, guest_halt_poll_ns is how long an
    idle vCPU polls before it halts; 0 makes every wake-up of an idle vCPU an exit to the
    hypervisor (the host's choice here: haltpoll.guest_halt_poll_ns=0 on its command line)."""
    def read(path):
        try:
            with open(os.path.join(root, path)) as f:
                return f.read().strip()
        except OSError:
            return ""
    driver = read("devices/system/cpu/cpuidle/current_driver")
    if not driver:
        return ""
    out = f"cpuidle driver {driver}, governor {read('devices/system/cpu/cpuidle/current_governor_ro') or read('devices/system/cpu/cpuidle/current_governor') or '?'}"
    poll = read("module/haltpoll/parameters/guest_halt_poll_ns")
    if driver == "haltpoll" and poll:
        out += ", guest halt polling " + (f"up to {int(poll) / 1000:g} µs" if poll != "0" else
                                          "off (guest_halt_poll_ns=0: an idle vCPU halts at once)")
    return out


def machine_info():
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    return {
        "cpu_model": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "fio": sh(["fio", "--version"]),
        "nbdkit": sh(["nbdkit", "--version"]),
        "ceph": sh(["ceph", "--version"]).split("(")[0].strip(),
        "cairn_git": sh(["git", "-C", HERE, "describe", "--always", "--dirty"]),
        "loadavg_end": " ".join(open("/proc/loadavg").read().split()[:3]),
        "damon": damon_schemes(),
    }


def fmt(v, digits=0):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)


def order_key(r):
    t = TARGET_ORDER.index(r["target"]) if r["target"] in TARGET_ORDER else 99
    names = [n for n, _, _ in load_workloads()]
    base = r["workload"].rsplit("-sds", 1)[0]
    w = names.index(base) if base in names else 99
    return (w, r.get("sds") or 0, t)


def write_plots(meas, dest, prefix):
    """IOPS and latency vs queue depth for 4k random reads, one line per target."""
    gp = shutil.which("gnuplot")
    if not gp:
        die("gnuplot not found: apt-get install gnuplot-nox (plots use its pngcairo terminal)")
    series = {}
    for r in meas:
        w = r["workload"]
        # the iSCSI pair runs under TCG in a guest: its scale is not comparable
        if w.startswith("randread-4k-qd") and not r.get("sds") and not r.get("round") and r["target"] not in ISCSI_TARGETS:
            series.setdefault(r["target"], []).append((int(w.rsplit("qd", 1)[1]), r))
    series = {t: sorted(v, key=lambda x: x[0]) for t, v in series.items() if len(v) >= 2}
    if not series:
        return []
    datdir = os.path.join(dest, prefix + "-plotdata")
    os.makedirs(datdir, exist_ok=True)
    targets = sorted(series, key=lambda t: TARGET_ORDER.index(t) if t in TARGET_ORDER else 99)
    for t in targets:
        with open(os.path.join(datdir, t + ".dat"), "w") as f:
            f.write("# qd iops mean_lat_us p99_lat_us\n")
            for qd, r in series[t]:
                f.write(f"{qd} {r['iops']} {r['mean_lat_us']} {r['p99_lat_us'] or 'NaN'}\n")
    iops_png, lat_png = prefix + "-iops-vs-qd.png", prefix + "-latency-vs-qd.png"
    # a target measured at two depths only (cairn-colocated: QD 1 and 32) gets points, no line
    # that would stand for the depths between
    style = {t: "linespoints" if len(series[t]) >= 3 else "points ps 2" for t in targets}
    lines = [
        "set terminal pngcairo size 900,560 noenhanced",
        "set logscale x 2", "set xlabel 'queue depth'", "set grid", "set key left top",
        f"set output '{os.path.join(dest, iops_png)}'",
        "set title '4k random read: IOPS vs queue depth'", "set ylabel 'IOPS'",
        "plot " + ", ".join(f"'{datdir}/{t}.dat' using 1:2 with {style[t]} lw 2 lc {i + 1} title '{t}'"
                            for i, t in enumerate(targets)),
        f"set output '{os.path.join(dest, lat_png)}'",
        "set title '4k random read: latency vs queue depth (solid: mean, dashed: p99)'",
        "set ylabel 'latency (us)'", "set logscale y",
        "plot " + ", ".join(
            f"'{datdir}/{t}.dat' using 1:3 with {style[t]} lw 2 lc {i + 1} title '{t} mean', "
            f"'{datdir}/{t}.dat' using 1:4 with {style[t]} lw 1 dt 2 lc {i + 1} title '{t} p99'"
            for i, t in enumerate(targets)),
    ]
    p = subprocess.run([gp], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        die(f"gnuplot failed: {p.stderr.strip()}")
    shutil.rmtree(datdir)
    return [iops_png, lat_png]


def cmd_report(a):
    records = read_records(a.out)
    meta_path = os.path.join(a.out, "meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    # what the run recorded (its commit when it started, the load when it ended) wins over
    # what is true when the report is rendered again later
    meta.update({k: v for k, v in machine_info().items() if k not in meta})
    ratios = compute_ratios(records)
    meas = sorted((r for r in records if r["kind"] == "measurement"), key=order_key)
    figures = [r for r in records if r["kind"] == "figure"]
    os.makedirs(a.dest, exist_ok=True)

    with open(os.path.join(a.dest, a.prefix + ".json"), "w") as f:
        json.dump(meas + figures + ratios, f, indent=1, sort_keys=True)
        f.write("\n")
    plots = write_plots(meas, a.dest, a.prefix)

    L = []
    L.append(f"# Cairn benchmarks ({meta.get('mode', '?')} run)\n")
    L.append(f"Measured {meta.get('date', '?')} by `tests/bench/run.sh {meta.get('mode', '?')}` "
             f"(`make bench` / `make bench-smoke`); every target in the same run, with the same fio jobs "
             f"(`tests/bench/workloads.conf`). Figures: [{a.prefix}.json]({a.prefix}.json).\n")
    L.append("## Machine and software\n")
    L.append(f"- CPU: {meta['cpu_model']}, **{meta['cores']} cores**; memory **{meta['memory_gib']} GiB**; "
             f"kernel {meta['kernel']}")
    L.append(f"- Storage: files on `{meta.get('workdir_fs', '?')}` (the same filesystem for every target)")
    if meta.get("cpu_idle"):
        L.append(f"- Idle CPUs: {meta['cpu_idle']}. It sets what waking an idle vCPU costs: the "
                 "wake-up price timed before each job (below).")
    if meta.get("damon"):
        L.append(f"- Proactive reclaim by the kernel (DAMON) was on: {meta['damon']}. Page-cache pages a target "
                 "leaves idle that long are dropped and read again from the disk when next used.")
    L.append(f"- {meta['fio']}; nbdkit {meta['nbdkit'].replace('nbdkit ', '')}; {meta['ceph'] or 'ceph: not installed'}; "
             f"Cairn {meta['cairn_git'] or '?'}")
    if meta.get("loadavg_start"):
        L.append(f"- Load average at start: {meta['loadavg_start']}, at the end: {meta['loadavg_end']}; process priority: nice {meta.get('nice', '?')} "
                 "(the machine may be shared: `busy %` below is the whole machine's CPU use during each job, "
                 f"out of {meta['cores'] * 100}%)")
    L.append("")
    L.append("## Parameters\n")
    L.append(f"- Region per target: **{meta.get('size_mib', '?')} MiB**, filled first with 1 MiB sequential "
             "writes at queue depth 8, then read back once the same way (neither time based nor measured). "
             "The read-back puts every target's reads in its steady state: nbdkit-file's fill stays in the "
             "page cache it writes through, Cairn's SDSs write with O_DIRECT and keep none of it.")
    L.append(f"- Each job: **{meta.get('ramp_s', '?')} s warm-up** (`ramp_time`, excluded from every figure) "
             f"then **{meta.get('runtime_s', '?')} s measured** (`runtime`); 1 job, `norandommap`, "
             "latency = submission to completion.")
    L.append("- raw: fio `io_uring`, `direct=1` on the backing file. nbdkit-file: nbdkit's file plugin "
             f"({meta.get('nbdkit_args', '')}) over NBD on 127.0.0.1, fio `nbd` engine. ceph-rbd: "
             f"{meta.get('ceph_desc', '')}. cairn-nbd: {meta.get('cairn_desc', 'tests/lib/cluster.sh')}, fio `nbd` engine. "
             "cairn-colocated: the same on a fresh cluster with its NBD server inside an SDS's process "
             "(`cairn colocate`, the hook started with CAIRN_COLOCATE=1). "
             "lio-fileio / tcmu-runner / cairn-iscsi: LIO in a qemu guest (TCG), one vCPU; fio `libiscsi` engine "
             "(absolute numbers are low under TCG; the ratios count). lio-fileio: LIO's fileio backstore on a "
             "tmpfs file; tcmu-runner: Debian's tcmu-runner (qcow handler, image on tmpfs) behind a LIO user "
             "backstore, the same TCMU ring Cairn's target uses; cairn-iscsi: `cairn target` in the guest, "
             f"the volume on the host's 3-SDS cluster {ISCSI_NET.get(meta.get('iscsi_net'), ISCSI_NET['slirp'])}."
             + (" tcmu-rbd: Debian's tcmu-runner, its rbd handler (librbd in the guest) on an image of a Ceph "
                "cluster like ceph-rbd's in the host's cluster namespace, reached over the tap NIC: a networked, "
                "mirrored backend behind the same ring (tests/lio/bench-hook.sh, BENCH_RBD_PEER=1)."
                if meta.get("iscsi_rbd_peer") == "1" else ""))
    L.append("- CPU per I/O = (fio's user+system time — its whole process tree, all threads, so librbd's "
             "threads count — + the servers' utime+stime, both from /proc/PID/stat sampled every 0.1 s and "
             "taken over fio's measured window) / I/Os. Servers: nbdkit; ceph mon+mgr+3 OSDs; all Cairn processes "
             "(mdm, sds, nbd); the qemu process for the iSCSI targets, with Cairn's host processes and qemu's "
             "relays for cairn-iscsi and Ceph's daemons for tcmu-rbd.")
    L.append("- MB/s are 10^6 bytes/s. For the mixed job, latency is the I/O-weighted mean and the larger p99 "
             "of reads and writes.")
    for kind, label in (("fill", "Fill rate"), ("warm", "Read-back rate")):
        done = sorted((r for r in records if r["kind"] == kind), key=order_key)
        if done:  # workload: KIND, or KIND-sdsN / KIND-rN
            L.append(f"- {label}: " + "; ".join(
                f"{r['target']}{'' if r['workload'] == kind else ' (' + r['workload'][len(kind) + 1:] + ')'} {r['mbps']:.0f} MB/s"
                for r in done))
    if meta.get("failed"):
        L.append("- **FAILED in this run** (results incomplete): " + "; ".join(f"{t}: {why}" for t, why in meta["failed"].items()))
    if meta.get("skipped"):
        L.append("- **Not measured in this run**: " + "; ".join(f"{t} ({why})" for t, why in meta["skipped"].items()))
    L.append("")
    L.append("## Results\n")
    L.append("| workload | target | IOPS | MB/s | mean lat (µs) | p99 lat (µs) | CPU µs/IO (fio + server) | busy % |")
    L.append("|---|---|--:|--:|--:|--:|--:|--:|")
    prev = None
    for r in (r for r in meas if not r.get("sds") and not r.get("round")):
        w = r["workload"] if r["workload"] != prev else ""
        prev = r["workload"]
        L.append(f"| {w} | {r['target']} | {fmt(r['iops'])} | {fmt(r['mbps'], 1)} | {fmt(r['mean_lat_us'])} "
                 f"| {fmt(r['p99_lat_us'])} | {fmt(r['cpu_us_per_io'], 1)} ({fmt(r['client_cpu_us_per_io'], 1)} + "
                 f"{fmt(r['server_cpu_us_per_io'], 1)}) | {fmt(r['system_busy_pct'])} |")
    L.append("")
    scaling = scaling_means(records)
    if scaling:
        rounds = max(m["rounds"] for counts in scaling.values() for m in counts.values())
        L.append("## Scaling: cairn-nbd with N SDSs, same total number of devices\n")
        if rounds > 1:
            L.append(f"Each SDS count on a fresh cluster in each of {rounds} rounds, the order of the counts "
                     "rotated every round; figures are the mean over the rounds, and the goal sets those "
                     "means against each other.\n")
        L.append("| SDSs | workload | rounds | IOPS | mean lat (µs) | CPU µs/IO (fio + server) | CPU µs/IO by round | busy % |")
        L.append("|--:|---|--:|--:|--:|--:|--:|--:|")
        for n, w in sorted(((n, w) for w, counts in scaling.items() for n in counts),
                           key=lambda x: (x[0], order_key({"workload": x[1], "target": "cairn-nbd"}))):
            m = scaling[w][n]
            L.append(f"| {n} | {w} | {m['rounds']} | {fmt(m['iops'])} | {fmt(m['mean_lat_us'])} "
                     f"| {fmt(m['cpu_us_per_io'], 1)} ({fmt(m['client_cpu_us_per_io'], 1)} + "
                     f"{fmt(m['server_cpu_us_per_io'], 1)}) | {', '.join(fmt(c, 1) for c in m['cpus'])} "
                     f"| {fmt(m['system_busy_pct'])} |")
        L.append("")
    sec = security_means(records)
    if sec:
        L.append("## Data-path security modes: cairn-nbd, same run\n")
        L.append("Each mode on a fresh cluster, the order of the modes rotated every round "
                 "(each mode once in each position over 3 rounds); figures are the mean over the rounds. "
                 "none: the data path without authentication; authenticated (the default with "
                 "certificates): mutual TLS 1.3 handshake, then CRC-checked frames; secure: TLS for the "
                 "whole stream.\n")
        L.append("| workload | mode | rounds | IOPS | mean lat (µs) | CPU µs/IO | CPU / none |")
        L.append("|---|---|--:|--:|--:|--:|--:|")
        for w in sorted(sec):
            base = sec[w].get("none")
            first = True
            for mode in SECURITY_MODES:
                m = sec[w].get(mode)
                if not m:
                    continue
                rel = f"{m['cpu_us_per_io'] / base['cpu_us_per_io']:.3f}" if base and base["cpu_us_per_io"] > 0 else "-"
                L.append(f"| {w if first else ''} | {mode} | {m['rounds']} | {fmt(m['iops'])} | {fmt(m['mean_lat_us'])} "
                         f"| {fmt(m['cpu_us_per_io'], 1)} | {rel} |")
                first = False
        L.append("")
    L.extend(wake_section(records))
    out = os.path.join(a.dest, a.prefix + ".md")
    old_page = open(out).read() if os.path.exists(out) else ""
    if ratios:
        headings = why_headings(old_page)
        L.append("## Goals (ratios from this run)\n")
        L.append("For each goal missed, the last column links to the hand-written analysis below: where "
                 "the time goes, what was tried and measured.\n")
        L.append("| workload | metric | target / versus | ratio | goal | met | where the time goes |")
        L.append("|---|---|---|--:|---|---|---|")
        for r in ratios:
            h = None if r["met"] else why_heading(r, headings)
            L.append(f"| {r['workload']} | {r['metric']} | {r['target']} / {r['versus']} | {r['ratio']:.2f} "
                     f"| {r['goal']} | {'yes' if r['met'] else '**no**'} | {f'[{h}](#{anchor(h)})' if h else ''} |")
        L.append("")
    if figures:
        L.append("## Other figures\n")
        L.append("| target | figure | value | goal | met |")
        L.append("|---|---|---|---|---|")
        for r in figures:
            vals = ", ".join(f"{k} {fmt(v, 2) if isinstance(v, float) else v}" for k, v in sorted(r.items())
                             if k not in ("kind", "target", "workload", "goal", "met", "note"))
            met = "" if "met" not in r else ("yes" if r["met"] else "**no**")
            L.append(f"| {r['target']} | {r['workload']} | {vals} | {r.get('goal', '')} | {met} |")
        L.append("")
    if plots:
        L.append("## Plots\n")
        L.append("Made with gnuplot (Debian's `gnuplot-nox`, pngcairo).\n")
        for p in plots:
            L.append(f"![{p}]({p})\n")
    L.append("## Reproduce\n")
    L.append("```\nmake bench          # full: all targets, < 40 min\nmake bench-smoke    # raw, nbdkit-file, "
             "cairn-nbd at QD 1 and 32, < 3 min\n```\nResults go to `tests/bench/out/` unless "
             "`BENCH_WRITE_DOCS=1` (then `docs/`). See `tests/bench/README.md` for the knobs.")
    # Sections other suites write into the same page are kept (the QoS
    # section, by tests/qos/run.sh), and the hand-written analysis: the
    # goals across days ("Across days ...") and of the missed goals ("Where
    # the time goes ..."), each from its heading to the next one.
    if old_page:
        old = old_page.split("\n## ")
        L.extend("\n## " + s.rstrip("\n") + "\n" for s in old[1:]
                 if s.startswith(("QoS", "Where the time goes", "Across days")))
    with open(out, "w") as f:
        f.write("\n".join(L) + "\n")
    print(f"report: {os.path.join(a.dest, a.prefix + '.md')} ({len(meas)} measurements, {len(ratios)} ratios, "
          f"{len(figures)} figures, {len(plots)} plots)")
    for r in ratios:
        print(f"  goal {r['workload']:26s} {r['metric']:14.14s} {r['target']}/{r['versus']} = {r['ratio']:.2f} "
              f"(goal {r['goal']}): {'met' if r['met'] else 'NOT met'}")


# The workloads whose every measurement (each target, each fresh cluster) the report sets
# beside the wake-up price timed before it.
WAKE_TABLE = ("randwrite-4k-qd32", "randread-4k-qd32")


def is_cairn_host(target):
    """Cairn on the host over NBD (every cluster layout and security mode), not through iSCSI."""
    return target in ("cairn-nbd", "cairn-colocated") or target.startswith("cairn-nbd-")


def wake_section(records):
    """The report's lines on the wake-up price during the run (none if no job recorded it)."""
    meas = [r for r in records if r["kind"] == "measurement"]
    probed = [r for r in meas if r.get("wake_cross_us") is not None]
    if not probed:
        return []
    cross = sorted(r["wake_cross_us"] for r in probed)
    same = sorted(r["wake_same_us"] for r in probed)
    L = ["## The machine during the run: the price of a wake-up\n",
         "Before every job, bench.py timed a round trip between two processes over two pipes "
         f"({WAKE_ROUNDS:,} rounds, `wake_probe`): one process on each of two CPUs, then both on one CPU. "
         "A round trip is two wake-ups. Across CPUs each is also an inter-processor interrupt and, in a VM, "
         "often a halted vCPU that the hypervisor must resume. That price belongs to the machine and the "
         "hour, not to the build. A Cairn I/O crosses four processes where nbdkit-file's crosses two, so "
         "Cairn's figures move with it more than its peers' (\"Cross-CPU wake-ups\" under Where the time "
         "goes). Each job's figures are in the JSON (`wake_cross_us`, `wake_same_us`).\n",
         f"- Over the run's {len(probed)} jobs, a round trip across CPUs took **{fmt(cross[0])}-{fmt(cross[-1])} µs** "
         f"(median {fmt(statistics.median(cross))}), on one CPU {fmt(same[0], 1)}-{fmt(same[-1], 1)} µs "
         f"(median {fmt(statistics.median(same), 1)}).", ""]
    for w in WAKE_TABLE:
        rows = [(i, r) for i, r in enumerate(meas, 1)
                if base_workload(r["workload"]) == w and r.get("wake_cross_us") is not None]
        if not rows:
            continue
        L.append(f"{w}, every target and fresh cluster in run order (# = the job's place in the run):\n")
        L.append("| # | target | cluster | round trip across CPUs (µs) | IOPS | server CPU µs/IO | busy % "
                 "| page cache (GiB) | file refaults / I/O |")
        L.append("|--:|---|---|--:|--:|--:|--:|--:|--:|")
        for i, r in rows:
            cluster = r["workload"][len(w) + 1:] or "-"
            L.append(f"| {i} | {r['target']} | {cluster} | {fmt(r['wake_cross_us'])} | {fmt(r['iops'])} "
                     f"| {fmt(r.get('server_cpu_us_per_io'), 1)} | {fmt(r.get('system_busy_pct'))} "
                     f"| {fmt(r.get('page_cache_gib'), 1)} | {fmt(r.get('file_refaults_per_io'), 3)} |")
        cairn = [r for _, r in rows if is_cairn_host(r["target"])]
        xs, ys = [r["wake_cross_us"] for r in cairn], [r["iops"] for r in cairn]
        if len(cairn) >= 3 and len(set(xs)) > 1 and len(set(ys)) > 1:
            L.append(f"\nOver Cairn's {len(cairn)} clusters on the host, the correlation of the round trip "
                     f"with IOPS is r = {statistics.correlation(xs, ys):.2f} (Pearson; negative: "
                     "a dearer wake-up, fewer IOPS).")
        L.append("")
    return L


def main():
    # run.sh stops a job with SIGTERM (deadline, Ctrl-C): unwind, so run_fio
    # kills fio's process group on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("workloads")
    p.add_argument("suite")
    p.set_defaults(fn=cmd_workloads)
    p = sub.add_parser("job")
    p.add_argument("--fio", default="fio")
    p.add_argument("--out", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--workload", required=True)
    p.add_argument("--runtime", type=int, default=8)
    p.add_argument("--ramp", type=int, default=2)
    p.add_argument("--size-mib", type=int, required=True)
    p.add_argument("--pids", default="", help="server pids, space separated")
    p.add_argument("--sds", type=int, default=0, help="scaling run: number of SDSs")
    p.add_argument("--round", type=int, default=0, help="security run: round number")
    p.add_argument("--timeout", type=int, default=0)
    p.add_argument("engine", nargs="+", help="engine arguments, after --")
    p.set_defaults(fn=cmd_job)
    p = sub.add_parser("add-record")
    p.add_argument("out")
    p.add_argument("json")
    p.set_defaults(fn=cmd_add_record)
    p = sub.add_parser("report")
    p.add_argument("out")
    p.add_argument("dest")
    p.add_argument("--prefix", default="benchmarks")
    p.set_defaults(fn=cmd_report)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
