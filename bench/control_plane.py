"""Control-plane scale: one service running many supervisors, against simulated tasks and
simulated stream metadata (bench/simulated.py; no Kafka, no Spark).

The service is the real app (uvicorn in a thread of this process, SQLite metadata DB, one
reconciler per supervisor); only its task runner and its StreamReader are simulated. The
simulated tasks answer from a process of their own and publish through the real publish
endpoint; the REST load comes from a process of its own too, so the CPU this process spends
is the service's. Phases, in one run:

1. ramp: submit every supervisor, wait until each task group has a task reading;
2. steady: the loops alone, for --steady-seconds (pass durations);
3. REST: reads and writes at a fixed --rps for --rest-seconds (latency from each request's
   scheduled start, so a stalled service is not hidden by a stalled client);
4. wave: hand off every group of every supervisor at once; the wave lasts from the first pause
   to the last group with a successor reading (target: within one `period`);
5. baseline: the loops stopped, the same REST requests (same seed) in the same process;
6. cost: the loops stopped, each kind of request sent one at a time: the service's CPU time
   per request (this process's CPU; the service is the only thing in it doing work).

    .venv/bin/python bench/control_plane.py --supervisors 1000 --partitions 16 --rps 200

Prints a table, writes bench/results/control_plane.json and ends with a RATIO line.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.rest_load import BASE, MIX, TASKS, Requests  # noqa: E402
from bench.simulated import SimulatedRunner, SimulatedStream  # noqa: E402
from supervisor import heap  # noqa: E402
from supervisor.controller.manager import SupervisorManager  # noqa: E402
from supervisor.devstack.specs import supervisor_spec  # noqa: E402
from supervisor.net import free_port, wait_for_port  # noqa: E402
from supervisor.settings import Settings  # noqa: E402
from supervisor.testkit.service import RunningService  # noqa: E402
from supervisor.testkit.waits import percentile  # noqa: E402
from tasks.spec.periods import duration_millis  # noqa: E402

TARGET_PASS_P99_MS = 100.0
TARGET_REST_P99_MS = 50.0


def spec(index: int, args: argparse.Namespace) -> dict[str, Any]:
    return supervisor_spec(
        f"sup{index:04d}",
        f"topic{index:04d}",
        "simulated-kafka:9092",
        ["channel", "page", "user"],
        period=args.period,
        taskDuration=args.task_duration,
        taskCount=args.task_count,
        replicas=args.replicas,
    )


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def manager(service: RunningService) -> SupervisorManager:
    found = service.app.state.context.manager
    assert isinstance(found, SupervisorManager)
    return found


def memory() -> dict[str, float]:
    """This process's resident memory (MiB) and thread count, from /proc/self/status."""
    found: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
        elif name == "Threads":
            found[name] = int(value)
    return found


# With --auth basic, every request carries the admin's Basic credentials (set by main()).
AUTH_HEADERS: dict[str, str] = {}
ADMIN_PASSWORD = "bench-admin-password"


def in_child(mode: str, url: str, params: dict[str, Any]) -> dict[str, Any]:
    """Run bench/rest_load.py (the REST load, or a burst) in a process of its own."""
    command = [sys.executable, str(ROOT / "bench" / "rest_load.py"), mode, url]
    params = {**params, "headers": AUTH_HEADERS}
    done = subprocess.run(
        command, input=json.dumps(params), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"rest_load.py {mode} failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# -- phases ------------------------------------------------------------------------------


class PassSamples:
    """Pass durations of every supervisor since `mark`, from their statuses' recent-pass
    buffers."""

    def __init__(self, manager: SupervisorManager) -> None:
        self.manager = manager
        self.counts: dict[str, int] = {}
        self.began = time.monotonic()
        self.cpu = time.process_time()

    def mark(self) -> None:
        statuses = self.manager.statuses
        self.counts = {sid: status.pass_count for sid, status in statuses.items()}
        self.began = time.monotonic()
        self.cpu = time.process_time()

    def take(self) -> dict[str, Any]:
        durations: list[float] = []
        truncated = failed = 0
        for sid, status in self.manager.statuses.items():
            new = status.pass_count - self.counts.get(sid, 0)
            recent = list(status.recent_passes)
            truncated += max(0, new - len(recent))
            durations += recent[len(recent) - min(new, len(recent)) :] if new > 0 else []
            failed += status.pass_count - status.passes
        seconds = time.monotonic() - self.began
        cpu = time.process_time() - self.cpu
        return {
            "passes": len(durations),
            # this process's CPU over the phase per pass: the passes' own cost, plus what the
            # service spends idle and (under load) on requests; steadier than tail latencies
            "cpu_ms_per_pass": cpu / len(durations) * 1000 if durations else float("nan"),
            "passes_per_s": len(durations) / seconds if seconds else 0.0,
            "p50_ms": percentile(durations, 50, nearest_rank=True) * 1000,
            "p99_ms": percentile(durations, 99, nearest_rank=True) * 1000,
            "max_ms": max(durations, default=float("nan")) * 1000,
            "samples_lost": truncated,
            "failed_passes_total": failed,
            "durations": durations,
        }


def submit_all(url: str, args: argparse.Namespace) -> None:
    with (
        httpx.Client(base_url=url, timeout=120, headers=AUTH_HEADERS) as api,
        ThreadPoolExecutor(4) as pool,
    ):
        for response in pool.map(
            lambda i: api.post(BASE, json=spec(i, args)), range(args.supervisors)
        ):
            response.raise_for_status()


def resume_all(url: str) -> None:
    """Resume whatever the REST load's writes left suspended."""
    with httpx.Client(base_url=url, timeout=120, headers=AUTH_HEADERS) as api:
        for entry in api.get(BASE, params={"state": "true"}).json():
            if entry["suspended"]:
                api.post(f"{BASE}/{entry['id']}/resume").raise_for_status()


def wait_reading(sim: httpx.Client, expected: int, timeout: float) -> float:
    """Seconds until `expected` simulated tasks are reading."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if sim.get("/sim/stats").json()["states"].get("READING", 0) >= expected:
            return time.monotonic() - began
        time.sleep(0.2)
    raise RuntimeError(f"fewer than {expected} tasks reading after {timeout} s")


def rest_phase(url: str, args: argparse.Namespace, plan: dict[str, Any]) -> dict[str, Any]:
    result = in_child("rest", url, {"rps": args.rps, "seconds": args.rest_seconds, "plan": plan})
    samples = result["samples"]
    ok = [s for s in samples if 200 <= s[2] < 300]
    by_kind: dict[str, dict[str, float]] = {}
    for kind in MIX:
        latencies = [s[1] for s in samples if s[0] == kind]
        by_kind[kind] = {
            "count": len(latencies),
            "p50_ms": percentile(latencies, 50, nearest_rank=True) * 1000,
            "p99_ms": percentile(latencies, 99, nearest_rank=True) * 1000,
        }
    latencies = [s[1] for s in samples]
    return {
        "requests": len(samples),
        "achieved_rps": len(samples) / result["seconds"],
        "errors": len(samples) - len(ok),
        "error_statuses": {  # 0: no answer within rest_load's timeout, or a broken connection
            str(code): sum(1 for s in samples if s[2] == code)
            for code in sorted({s[2] for s in samples if not 200 <= s[2] < 300})
        },
        "p50_ms": percentile(latencies, 50, nearest_rank=True) * 1000,
        "p99_ms": percentile(latencies, 99, nearest_rank=True) * 1000,
        "max_ms": max(latencies, default=float("nan")) * 1000,
        "client_late_p99_ms": percentile(result["late_s"], 99, nearest_rank=True) * 1000,
        "by_kind": by_kind,
        "connections": result["connections"],
    }


def cost_phase(url: str, plan: dict[str, Any], count: int) -> dict[str, dict[str, float]]:
    """CPU milliseconds of this process per request, for each kind, sent one at a time (less
    what the process spends idle in as long: the task monitor's polls, the simulated runner)."""
    cpu = time.process_time()
    time.sleep(2.0)
    idle_per_s = (time.process_time() - cpu) / 2.0
    costs: dict[str, dict[str, float]] = {}
    for kind in MIX:
        requests = Requests(plan, random.Random(11))
        batch = [requests.make(kind) for _ in range(count)]
        cpu, began = time.process_time(), time.monotonic()
        result = in_child("serial", url, {"requests": batch})
        spent = time.process_time() - cpu - idle_per_s * (time.monotonic() - began)
        costs[kind] = {
            "cpu_ms": spent / count * 1000,
            "p50_ms": percentile(result["latencies"], 50, nearest_rank=True) * 1000,
            "errors": result["errors"],
        }
    return costs


def wave_phase(
    url: str, sim: httpx.Client, args: argparse.Namespace, ids: list[str]
) -> dict[str, Any]:
    """Hand off every group of every supervisor at once; time it from the simulated tasks."""
    groups = list(range(args.task_count))
    requests = [
        ("POST", f"{BASE}/{sid}/taskGroups/handoff", {"taskGroupIds": groups}) for sid in ids
    ]
    since = time.time()
    sent = in_child("burst", url, {"requests": requests, "width": 32})
    deadline = time.monotonic() + max(300.0, 10 * period_s(args))
    drained: float | None = None  # after every successor reads, how long to wait for publishes
    while True:
        wave = sim.get("/sim/wave", params={"since": since}).json()
        groups_done = [
            (min(e["paused"]), max(e["reading"]), e["ended"])
            for e in wave.values()
            if len(e["rolled"]) >= args.task_count * args.replicas and None not in e["reading"]
        ]
        ended = sum(1 for g in groups_done if None not in g[2])
        if len(groups_done) >= len(ids):
            drained = drained or time.monotonic() + 60
            if ended == len(groups_done) or time.monotonic() > drained:
                break
        elif time.monotonic() > deadline:  # report what finished; the wave counts as endless
            progress(f"the wave did not finish: {len(groups_done)} of {len(ids)} rolled")
            break
        time.sleep(0.5)
    first_pause = min(g[0] for g in groups_done)
    gaps = [g[1] - g[0] for g in groups_done]
    ends = [t for g in groups_done for t in g[2] if t is not None]
    return {
        "handoff_requests_s": sent["ended"] - sent["began"],
        "handoff_errors": sent["errors"],
        "wave_s": max(g[1] for g in groups_done) - first_pause
        if len(groups_done) >= len(ids)
        else float("inf"),
        "groups_rolled": len(groups_done),
        "from_first_request_s": max(g[1] for g in groups_done) - sent["began"],
        "gap_p50_s": percentile(gaps, 50, nearest_rank=True),
        "gap_p99_s": percentile(gaps, 99, nearest_rank=True),
        "published_s": max(ends, default=float("nan")) - first_pause,
        "unpublished_after_60s": len(groups_done) - ended,
    }


def period_s(args: argparse.Namespace) -> float:
    return duration_millis(args.period) / 1000


# -- the run ------------------------------------------------------------------------------


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    epoch = time.time()
    port, sim_port = free_port(), free_port()
    settings = Settings(
        port=port,
        metadata_url=f"sqlite:///{root / 'meta.db'}",
        deep_storage=root / "deep",
        work_dir=root / "work",
        kill_tasks_on_exit=True,
        log_level="warning",
        auth=args.auth,
        admin_password=ADMIN_PASSWORD,
    )
    simulator = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "simulated_tasks.py"),
            f"--port={sim_port}",
            f"--overlord=http://127.0.0.1:{port}",
            f"--epoch={epoch}",
            f"--rate={args.rate}",
            f"--publish-delay={args.publish_delay}",
        ]
    )
    sim_url = f"http://127.0.0.1:{sim_port}"
    if not wait_for_port("127.0.0.1", sim_port, 60):
        raise RuntimeError("the simulated task server did not start")
    runner = SimulatedRunner(settings, sim_url)
    service = RunningService(settings, settings.port, runner, access_log=False)
    heap.settle(settings.gc_young_threshold)  # as `sluicegate serve` does
    service.start()
    stream = SimulatedStream(args.partitions, args.rate, epoch)
    manager(service).reconciler.stream = stream  # before any supervisor exists
    results: dict[str, Any] = {"memory_idle": memory()}
    try:
        with httpx.Client(base_url=sim_url, timeout=60) as sim:
            results.update(measure(args, service, sim))
    finally:
        service.stop()
        runner.close()
        simulator.terminate()
        simulator.wait(10)
    results["stream_describe_calls"] = stream.calls
    return results


def measure(args: argparse.Namespace, service: RunningService, sim: httpx.Client) -> dict[str, Any]:
    results: dict[str, Any] = {}
    groups = args.supervisors * args.task_count * args.replicas
    began = time.monotonic()
    progress(f"submitting {args.supervisors} supervisors")
    submit_all(service.url, args)
    results["submit_s"] = time.monotonic() - began
    results["ramp_s"] = wait_reading(sim, groups, 600) + results["submit_s"]
    ids = sorted(manager(service).known)
    passes = PassSamples(manager(service))
    calls_before = sum(sim.get("/sim/stats").json()["requests"].values())
    progress(f"every group reading after {results['ramp_s']:.1f} s; loops alone")
    passes.mark()
    time.sleep(args.steady_seconds)
    results["steady"] = passes.take()
    calls = sum(sim.get("/sim/stats").json()["requests"].values()) - calls_before
    results["task_api_calls_per_s"] = calls / args.steady_seconds
    plan = rest_plan(args, ids, service.url)
    progress(f"REST load at {args.rps:.0f} req/s")
    passes.mark()
    results["rest"] = rest_phase(service.url, args, plan)
    results["rest_passes"] = passes.take()
    resume_all(service.url)
    wait_reading(sim, groups, 600)
    progress("rollover wave")
    passes.mark()
    results["wave"] = wave_phase(service.url, sim, args, ids)
    results["wave_passes"] = passes.take()
    results["memory_loaded"] = memory()
    results["sim"] = sim.get("/sim/stats").json()
    if results["wave"]["unpublished_after_60s"]:
        progress(f"publish answers: {results['sim']['publish_answers']}")
    progress("loops stopped; baseline REST load")
    manager(service).stop()  # the baseline: no loop runs, the same requests
    results["baseline"] = rest_phase(service.url, args, plan)
    progress("loops stopped; CPU per request")
    resume_all(service.url)
    results["cost"] = cost_phase(service.url, plan, args.cost_requests)
    return results


def rest_plan(args: argparse.Namespace, ids: list[str], url: str) -> dict[str, Any]:
    """Whom the REST load reads and writes: suspend/resume toggles a set of its own (up to
    50 supervisors), unchanged specs are resubmitted for the others; running tasks' ids."""
    toggle = ids[: max(1, min(50, len(ids) // 2))]
    resubmit = [index for index, sid in enumerate(ids) if sid not in toggle]
    with httpx.Client(base_url=url, timeout=120, headers=AUTH_HEADERS) as api:
        running = api.get(f"{TASKS}/tasks", params={"state": "running"}).json()
    return {
        "ids": ids,
        "toggle": toggle,
        "suspended": [],
        "resubmit": resubmit,
        "specs": {str(i): spec(i, args) for i in resubmit},
        "task_ids": [task["id"] for task in running],
    }


def _statuses(phase: dict[str, Any]) -> str:
    return " ".join(f"{code}:{n}" for code, n in phase["error_statuses"].items()) or "-"


def _ms(pair: tuple[float, float]) -> str:
    return f"{pair[0]:.1f} / {pair[1]:.1f}"


def summarize(args: argparse.Namespace, r: dict[str, Any]) -> dict[str, Any]:
    """The headline figures (JSON-ready) from the phases' results."""
    every = r["steady"]["durations"] + r["rest_passes"]["durations"] + r["wave_passes"]["durations"]
    loaded, idle = r["memory_loaded"], r["memory_idle"]
    period = period_s(args)
    return {
        "pass_p50_ms": percentile(every, 50, nearest_rank=True) * 1000,
        "pass_p99_ms": percentile(every, 99, nearest_rank=True) * 1000,
        "rest_p50_ms": r["rest"]["p50_ms"],
        "rest_p99_ms": r["rest"]["p99_ms"],
        "rest_p99_vs_baseline": r["rest"]["p99_ms"] / r["baseline"]["p99_ms"],
        "wave_s": r["wave"]["wave_s"],
        "period_s": period,
        "wave_vs_period": r["wave"]["wave_s"] / period,
        "cpu_ms_per_pass": r["steady"]["cpu_ms_per_pass"],
        "wave_cpu_ms_per_pass": r["wave_passes"]["cpu_ms_per_pass"],
        "cpu_ms_per_request": sum(
            r["cost"][kind]["cpu_ms"] * weight for kind, weight in MIX.items()
        )
        / sum(MIX.values()),
        "rss_mb": loaded["VmRSS"],
        "peak_rss_mb": loaded["VmHWM"],
        "rss_per_supervisor_kb": (loaded["VmRSS"] - idle["VmRSS"]) * 1024 / args.supervisors,
    }


def report(args: argparse.Namespace, r: dict[str, Any]) -> None:
    head = summarize(args, r)
    steady, rest, wave_p, wave = r["steady"], r["rest"], r["wave_passes"], r["wave"]
    base, loaded = r["baseline"], r["memory_loaded"]
    rows = [
        ("ramp: submit all, every group reading (s)", f"{r['ramp_s']:.1f}", "", ""),
        ("pass p50 / p99, loops alone (ms)", _ms((steady["p50_ms"], steady["p99_ms"])), "", ""),
        (
            "pass p50 / p99, under REST load (ms)",
            _ms((r["rest_passes"]["p50_ms"], r["rest_passes"]["p99_ms"])),
            "",
            "",
        ),
        ("pass p50 / p99, during the wave (ms)", _ms((wave_p["p50_ms"], wave_p["p99_ms"])), "", ""),
        (
            "pass p99, all phases (ms)",
            f"{head['pass_p99_ms']:.1f}",
            f"<= {TARGET_PASS_P99_MS:.0f}",
            head["pass_p99_ms"] <= TARGET_PASS_P99_MS,
        ),
        ("passes/s, loops alone", f"{steady['passes_per_s']:.0f}", "", ""),
        (
            "service CPU per pass, loops alone / wave (ms)",
            _ms((head["cpu_ms_per_pass"], head["wave_cpu_ms_per_pass"])),
            "",
            "",
        ),
        (
            "task API calls/s by the service, loops alone",
            f"{r['task_api_calls_per_s']:.0f}",
            "",
            "",
        ),
        (
            f"REST p50 / p99 at {rest['achieved_rps']:.0f} req/s (ms)",
            _ms((rest["p50_ms"], rest["p99_ms"])),
            f"p99 <= {TARGET_REST_P99_MS:.0f}",
            rest["p99_ms"] <= TARGET_REST_P99_MS,
        ),
        (
            "REST p50 / p99, loops stopped (baseline, ms)",
            _ms((base["p50_ms"], base["p99_ms"])),
            "",
            "",
        ),
        ("REST p99 vs baseline", f"{head['rest_p99_vs_baseline']:.2f}", "", ""),
        ("REST errors (under load / baseline)", f"{rest['errors']} / {base['errors']}", "", ""),
        (
            "  by status (under load | baseline)",
            f"{_statuses(rest)} | {_statuses(base)}",
            "",
            "",
        ),
        (
            "service CPU per request at the mix, loops stopped (ms)",
            f"{head['cpu_ms_per_request']:.2f}",
            "",
            "",
        ),
        (
            "rollover wave: first pause -> last successor reading (s)",
            f"{wave['wave_s']:.1f}",
            f"<= period {head['period_s']:.0f}",
            wave["wave_s"] <= head["period_s"],
        ),
        ("  handoff requests sent in (s)", f"{wave['handoff_requests_s']:.1f}", "", ""),
        (
            "  a group's gap pause -> successor reading p50 / p99 (s)",
            f"{wave['gap_p50_s']:.1f} / {wave['gap_p99_s']:.1f}",
            "",
            "",
        ),
        (
            "  rolled tasks published (s; not within 60 s more)",
            f"{wave['published_s']:.1f} ({wave['unpublished_after_60s']})",
            "",
            "",
        ),
        (
            "service RSS idle / loaded / peak (MiB)",
            f"{r['memory_idle']['VmRSS']:.0f} / {loaded['VmRSS']:.0f} / {loaded['VmHWM']:.0f}",
            "",
            "",
        ),
        ("RSS per supervisor (KiB)", f"{head['rss_per_supervisor_kb']:.0f}", "", ""),
        ("service threads", f"{loaded['Threads']:.0f}", "", ""),
        ("failed passes", f"{wave_p['failed_passes_total']}", "", ""),
    ]
    print(
        f"\nControl-plane scale: {args.supervisors} supervisors x {args.partitions} partitions "
        f"(taskCount {args.task_count}, replicas {args.replicas}, period {args.period})"
    )
    print(
        "SIMULATED TASKS (one asyncio server in another process answers every task's control "
        "API and publishes through the real publish endpoint) and SIMULATED STREAM METADATA "
        "(no Kafka): the service, its SQLite DB, its loops and its REST API are real."
    )
    width = max(len(row[0]) for row in rows) + 2
    print(f"{'figure':<{width}}{'value':>18}{'target':>18}{'met':>6}")
    for name, value, target, met in rows:
        mark = "" if target == "" else ("yes" if met else "NO")
        print(f"{name:<{width}}{value:>18}{target:>18}{mark:>6}")
    print("\nREST latency by request kind (ms), under load | baseline | one at a time: CPU, p50")
    for kind, figures in rest["by_kind"].items():
        other, cost = base["by_kind"][kind], r["cost"][kind]
        print(
            f"  {kind:<40}{figures['count']:>6}  p50 {figures['p50_ms']:>7.1f}  "
            f"p99 {figures['p99_ms']:>7.1f} | "
            f"p50 {other['p50_ms']:>7.1f}  p99 {other['p99_ms']:>7.1f} | "
            f"{cost['cpu_ms']:>5.2f} {cost['p50_ms']:>6.2f}"
        )
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    for phase in ("steady", "rest_passes", "wave_passes"):
        r[phase].pop("durations")
    document = {
        "args": vars(args),
        "headline": head,
        **r,
        "simulated": ["tasks", "stream metadata"],
    }
    (out / "control_plane.json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    print(
        f"RATIO pass_p99_ms={head['pass_p99_ms']:.1f} rest_p99_ms={head['rest_p99_ms']:.1f} "
        f"rest_p99_vs_baseline={head['rest_p99_vs_baseline']:.2f} wave_s={head['wave_s']:.1f} "
        f"wave_vs_period={head['wave_vs_period']:.2f} rss_mb={head['rss_mb']:.0f} "
        f"cpu_ms_per_request={head['cpu_ms_per_request']:.2f} "
        f"cpu_ms_per_pass={head['cpu_ms_per_pass']:.2f} "
        f"wave_cpu_ms_per_pass={head['wave_cpu_ms_per_pass']:.2f} "
        f"supervisors={args.supervisors} partitions={args.partitions}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--supervisors", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--task-count", type=int, default=1, help="ioConfig.taskCount")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--rps", type=float, default=200.0, help="REST requests per second")
    parser.add_argument("--rest-seconds", type=float, default=10.0)
    parser.add_argument("--steady-seconds", type=float, default=10.0)
    parser.add_argument("--period", default="PT30S", help="ioConfig.period (Druid's default)")
    parser.add_argument("--task-duration", default="PT1H", help="long: the wave is a handoff")
    parser.add_argument("--rate", type=float, default=100.0, help="records/s per partition")
    parser.add_argument("--publish-delay", type=float, default=1.0, help="simulated build, s")
    parser.add_argument(
        "--cost-requests", type=int, default=200, help="per kind, for the CPU per request"
    )
    parser.add_argument(
        "--auth",
        choices=("none", "basic"),
        default="none",
        help="basic: every request authenticated (the admin, HTTP Basic)",
    )
    args = parser.parse_args()
    if args.auth == "basic":
        token = base64.b64encode(f"admin:{ADMIN_PASSWORD}".encode()).decode()
        AUTH_HEADERS["Authorization"] = f"Basic {token}"
    logging.getLogger("supervisor").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="sluicegate-control-") as tmp:
        results = run(args, Path(tmp))
    report(args, results)


if __name__ == "__main__":
    main()
