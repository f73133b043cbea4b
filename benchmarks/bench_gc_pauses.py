"""The cyclic garbage collector's pauses in a serving broker (issue 23: the linger.ms=0 p99).

A collection runs on the event loop between two requests, so its pause is every waiting client's latency. An
``odradek serve`` process is started with a ``sitecustomize`` of this benchmark's on its path that times each
collection (``gc.callbacks``); 8 seconds of a tailing consumer's load follow (a producer at 10,000 records/s,
linger.ms=0, each record its own request, and a consumer reading them), then the broker stops and writes what
it timed. Reported: how many collections of each generation ran and the longest pause of each, and the
full collection's pause. ``python benchmarks/bench_gc_pauses.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from run import Result

SECONDS = 8
RATE = 10_000
_SITE = '''
import atexit, gc, json, os, time
_pauses, _start = [], [0]
def _timed(phase, info):
    if phase == "start":
        _start[0] = time.perf_counter_ns()
    else:
        _pauses.append((info["generation"], time.perf_counter_ns() - _start[0]))
gc.callbacks.append(_timed)
def _write():
    with open(os.environ["ODRADEK_BENCH_GC_OUT"], "w") as f:
        json.dump(_pauses, f)
atexit.register(_write)
'''


def run() -> list[Result]:
    from confluent_kafka import Consumer, Producer

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "sitecustomize.py").write_text(_SITE)
        out = Path(tmp, "pauses.json")
        env = dict(os.environ, PYTHONPATH=tmp, ODRADEK_BENCH_GC_OUT=str(out))
        broker = subprocess.Popen(
            [sys.executable, "-m", "odradek", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={tmp}/logs"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        )
        assert broker.stdout is not None
        port = next(line.rsplit(":", 1)[1].split(",")[0] for line in broker.stdout if "started in" in line)
        threading.Thread(target=broker.stdout.read, daemon=True).start()
        bootstrap = f"127.0.0.1:{port}"
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        producer.produce("gc", b"first")
        producer.flush(10)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "gc", "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
        consumer.subscribe(["gc"])
        stop = threading.Event()

        def consume() -> None:
            while not stop.is_set():
                consumer.poll(0.1)

        reader = threading.Thread(target=consume)
        reader.start()
        start = time.perf_counter()
        for i in range(SECONDS * RATE):
            if (wait := start + i / RATE - time.perf_counter()) > 0:
                time.sleep(wait)
            producer.produce("gc", b"x" * 100)
            producer.poll(0)
        producer.flush(10)
        stop.set()
        reader.join()
        consumer.close()
        broker.terminate()
        broker.wait(60)
        pauses = json.loads(out.read_text())
    results = []
    for generation in (0, 1, 2):
        times = [ns / 1e6 for g, ns in pauses if g == generation]
        results.append(Result(f"generation {generation} collections during the run (start-up included)", len(times), "collections"))
        results.append(Result(f"generation {generation}: longest pause", max(times, default=0.0), "ms (lower is better)"))
    return results


if __name__ == "__main__":
    for result in run():
        print(result)
