"""Admin clients: what the tasks of a host application cost the process and the broker when
each asks where its partitions end through a client of its own, against one shared client.

N readers (the tasks of a shared application, tasks/runtime/shared.py: threads of one process),
each of its own one-partition topic on a real broker, ask for their partition's latest offset
every `--every` seconds for `--seconds`, as a reading task does before each batch. Two ways, in
this process one after the other:

- shared (the product): OffsetReader(shared=True), one admin client per cluster for them all
  (tasks/kafka_offsets.py SharedAdmins);
- own (the baseline, the product before): an OffsetReader each, so an admin client each.

Shared runs first, so the memory it gains is not memory the baseline freed and the process
kept.

For each: the threads the process gained, its TCP connections to the broker, its resident
memory gained, and the time of a call (p50, p99).

    .venv/bin/python bench/admin_clients.py --readers 200

Writes bench/results/admin_clients.json and ends with
`RATIO readers=N threads_own=.. threads_shared=.. connections_own=.. connections_shared=..
call_p99_ms_own=.. call_p99_ms_shared=.. threads_vs_own=<own / shared>`.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from live import write_results

from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.topics import create_topic
from supervisor.settings import Settings
from supervisor.testkit.waits import median, percentile
from tasks.kafka_offsets import OffsetReader


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def connections(port: int) -> int:
    """This process's established TCP connections to `port`."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if fields[3] == "01" and remote_port == port and fields[9] in inodes:
                count += 1
    return count


def run(way: str, bootstrap: str, topics: list[str], args: argparse.Namespace) -> dict[str, Any]:
    port = int(bootstrap.rsplit(":", 1)[1])
    gc.collect()
    time.sleep(1.0)
    threads_before, rss_before = threads(), rss_mb()
    readers = [
        OffsetReader({"bootstrap.servers": bootstrap}, retry_transient=True, shared=way == "shared")
        for _ in topics
    ]
    calls: list[float] = []
    lock = threading.Lock()
    stop = threading.Event()

    def task(reader: OffsetReader, topic: str) -> None:
        while not stop.is_set():
            began = time.perf_counter()
            reader.latest(topic, [0])
            with lock:
                calls.append(time.perf_counter() - began)
            stop.wait(args.every)

    workers = [
        threading.Thread(target=task, args=(reader, topic), daemon=True)
        for reader, topic in zip(readers, topics, strict=True)
    ]
    for worker in workers:
        worker.start()
    time.sleep(args.seconds)
    # measured while they ask, less the readers' own Python threads
    gained = threads() - threads_before - len(workers)
    held, memory = connections(port), rss_mb() - rss_before
    stop.set()
    for worker in workers:
        worker.join()
    del readers, workers
    gc.collect()
    ms = [c * 1000 for c in calls]
    return {
        "threads": gained,
        "connections": held,
        "rss_mb": round(memory, 1),
        "calls": len(ms),
        "call_p50_ms": round(median(ms), 2),
        "call_p99_ms": round(percentile(ms, 99), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readers", type=int, default=200)
    parser.add_argument("--every", type=float, default=1.0, help="seconds between a reader's asks")
    parser.add_argument("--seconds", type=float, default=15.0, help="how long each way asks")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="admin-clients-"))
    broker = LocalKafka(root / "kafka", Settings().jar_cache).start()
    try:
        bootstrap = broker.bootstrap_servers
        topics = [f"quiet-{n}" for n in range(args.readers)]
        for topic in topics:
            create_topic(bootstrap, topic, 1)
        results: dict[str, Any] = {"readers": args.readers, "every_s": args.every}
        for way in ("shared", "own"):
            results[way] = run(way, bootstrap, topics, args)
            print(way, results[way], flush=True)
    finally:
        broker.stop()
    print(f"results: {write_results('admin_clients', results)}")
    own, shared = results["own"], results["shared"]
    print(
        f"RATIO readers={args.readers} threads_own={own['threads']} "
        f"threads_shared={shared['threads']} connections_own={own['connections']} "
        f"connections_shared={shared['connections']} call_p99_ms_own={own['call_p99_ms']} "
        f"call_p99_ms_shared={shared['call_p99_ms']} "
        f"threads_vs_own={own['threads'] / max(1, shared['threads']):.1f}"
    )


if __name__ == "__main__":
    main()
