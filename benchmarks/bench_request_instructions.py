"""Instructions per small request (issue 23 item 2, the per-request floor), counted by valgrind's callgrind.

CPU time per request on a shared two-core machine moves by tens of percent with the load; the instructions a
request runs do not, so trees are compared by them (docs/performance.md, the per-request floor's rounds):

* through a socket: ``odradek serve`` under callgrind with collection off, one client sending a request and
  waiting for its answer; collection is switched on (``callgrind_control``) for ``REQUESTS`` requests after
  ``WARM_UP``, so the count is the broker's user-space instructions from frame to answer, the event loop's
  turn included (not the kernel's). A client much faster than the broker under valgrind finds the broker
  rarely idle, as a busy broker is. What the broker's periodic tasks run meanwhile (~1 M instructions a
  second, counted first in an idle window) is taken off in proportion to the window's duration: under
  valgrind on a loaded machine a window lasts longer, and without this its count grew with the load (by up
  to ~10%).
* in-process, by stage: a ``Broker()`` whose loop runs the request's decode, decode + handler and encode
  ``REQUESTS`` times each, each stage counted on its own (``--toggle-collect`` on the C function that runs its
  loop), in the loop's thread alone: the toggle is one switch for the whole process, so a count of all threads
  took in whatever others ran meanwhile (the broker's deferred start-up work, later on a loaded machine: up to
  ~15k per request). Repeated runs agree within ~0.3%.

The requests are ``bench_request_path.py``'s: a 1-record produce v9 (acks=1, and acks=all on a topic of one
replica) and a small fetch v12 (one 1-record batch). Through a socket also a tailing consumer's round, the
usual state of a consumer that keeps up (and the end-to-end latency benchmark's with linger.ms=0): its long
poll waits at the log end, the client idles 2 ms, then a 1-record produce on another connection answers both. Needs valgrind (``apt-get install valgrind``); each part
takes a minute or so. ``python benchmarks/bench_request_instructions.py [through_socket|in_process]``.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from bench_request_path import ONE_RECORD, SMALL, TOPIC, _answer, _create_body, _exchange, _fetch_body, _produce_body
from run import Result

from odradek.protocol.api import ApiKey, encode_request

REQUESTS = 1000
WARM_UP = 300
IDLE_S = 5
"""Seconds the broker is counted idle first: what its periodic tasks run per second (~1 M instructions) is
taken off each count in proportion to its duration, which under valgrind grows with the machine's load."""
UNIT = "instructions (lower is better)"
_ALL = {**_produce_body(TOPIC, ONE_RECORD), "acks": -1}
KINDS = {
    "1-record produce, acks=1 (v9)": (ApiKey.Produce, 9, _produce_body(TOPIC, ONE_RECORD)),
    "1-record produce, acks=all, one replica (v9)": (ApiKey.Produce, 9, _ALL),
    "small fetch, one 1-record batch (v12)": (ApiKey.Fetch, 12, _fetch_body(SMALL)),
}
TAILED = "tailed"
TAILING = "a tailing consumer's round: a long poll (v12) at the log end answered by a 1-record produce (v9)"


def _long_poll(topic: str, offset: int) -> dict:
    return {**_fetch_body(topic), "max_wait_ms": 5000, "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}


_STAGES = {"functools_reduce": "decode", "builtin_sorted": "decode + handler", "min_max": "encode"}
"""The C function each in-process stage's loop runs in, collection toggled on its entry and exit."""


def _env() -> dict[str, str]:
    """Hash randomisation off; bytecode caches written, as an installed package's are."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _total(dump: str) -> int:
    """The instructions a dump counted (its ``totals:`` line, the last)."""
    with open(dump) as f:
        return next(int(line.split()[1]) for line in f if line.startswith("totals:"))


def through_socket() -> list[Result]:
    out = tempfile.mkdtemp(prefix="callgrind-")
    with tempfile.TemporaryDirectory() as log_dir:
        proc = subprocess.Popen(
            ["setarch", "-R", "valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}/cg.%p",
             sys.executable, "-m", "odradek", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={log_dir}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(),
        )
        try:
            assert proc.stdout is not None
            port = next(int(m.group(1)) for line in proc.stdout if (m := re.search(r"started in \d+ ms: listeners \w+://[^:,\s]+:(\d+)", line)))
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            time.sleep(8)  # the start's deferred work (the log cleaner's import, ~1 s later) done before counting
            dumps = itertools.count(1)

            def counted(work: Callable[[], object]) -> tuple[int, float]:
                """The broker's instructions while ``work`` runs, and the seconds it took."""
                control = ["callgrind_control"]
                subprocess.run([*control, "-z", str(proc.pid)], capture_output=True, check=True)
                subprocess.run([*control, "-i", "on", str(proc.pid)], capture_output=True, check=True)
                start = time.monotonic()
                work()
                seconds = time.monotonic() - start
                subprocess.run([*control, "-i", "off", str(proc.pid)], capture_output=True, check=True)
                subprocess.run([*control, "-d", str(proc.pid)], capture_output=True, check=True)
                path = f"{out}/cg.{proc.pid}.{next(dumps)}"
                while not os.path.exists(path):
                    time.sleep(0.1)
                time.sleep(0.5)  # written whole
                return _total(path), seconds

            idle, idle_s = counted(lambda: time.sleep(IDLE_S))
            results = []
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                _exchange(sock, encode_request(ApiKey.CreateTopics, 5, 1, _create_body(TOPIC, SMALL)))
                _exchange(sock, encode_request(ApiKey.Produce, 9, 1, _produce_body(SMALL, ONE_RECORD)))
                for name, (api_key, version, body) in KINDS.items():
                    frame = encode_request(api_key, version, 1, body)
                    for _ in range(WARM_UP):
                        _exchange(sock, frame)
                    total, seconds = counted(lambda: [_exchange(sock, frame) for _ in range(REQUESTS)])
                    results.append(Result(f"{name}: frame to answer through a socket (broker, user space)", (total - idle / idle_s * seconds) / REQUESTS, UNIT))
                with socket.create_connection(("127.0.0.1", port)) as tail:
                    tail.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    _exchange(sock, encode_request(ApiKey.CreateTopics, 5, 1, _create_body(TAILED)))
                    rounds = itertools.count()
                    produce = encode_request(ApiKey.Produce, 9, 1, _produce_body(TAILED, ONE_RECORD))

                    def tailing_round() -> None:
                        """A consumer's long poll waits at the log end; a 1-record produce answers it."""
                        tail.sendall(encode_request(ApiKey.Fetch, 12, 1, _long_poll(TAILED, next(rounds))))
                        time.sleep(0.002)  # parked: the broker idles, as between a tailing consumer's records
                        _exchange(sock, produce)
                        _answer(tail)

                    for _ in range(WARM_UP):
                        tailing_round()
                    total, seconds = counted(lambda: [tailing_round() for _ in range(REQUESTS)])
                    results.append(Result(f"{TAILING}: through a socket (broker, user space)", (total - idle / idle_s * seconds) / REQUESTS, UNIT))
            return results
        finally:
            proc.terminate()
            proc.wait(60)
            shutil.rmtree(out, ignore_errors=True)


def in_process() -> list[Result]:
    results = []
    for name in KINDS:
        with tempfile.TemporaryDirectory() as out:
            subprocess.run(
                ["setarch", "-R", "valgrind", "--tool=callgrind", "--separate-threads=yes", *(f"--toggle-collect={fn}" for fn in _STAGES),
                 f"--callgrind-out-file={out}/cg", sys.executable, __file__, "_stages", name],
                env=_env(), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=Path(__file__).parent,
            )
            counts: dict[str, float] = {}
            for dump in Path(out).glob("cg-*"):  # one a thread: each stage's count is the loop thread's, the largest
                annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(dump)], capture_output=True, text=True, check=True).stdout
                found: dict[str, float] = {}
                for line in annotated.splitlines():
                    fields = line.split()
                    if len(fields) >= 3 and fields[0][0].isdigit():
                        place = fields[-2] if fields[-1].startswith("[") else fields[-1]  # file:function [object]
                        function = place.rsplit(":", 1)[-1]
                        if function in _STAGES and _STAGES[function] not in found:
                            found[_STAGES[function]] = int(fields[0].replace(",", "")) / REQUESTS
                for stage, count in found.items():
                    counts[stage] = max(counts.get(stage, 0.0), count)
        decode, decoded_and_handled, encode = counts["decode"], counts["decode + handler"], counts["encode"]
        results += [
            Result(f"{name}: decode (in-process)", decode, UNIT),
            Result(f"{name}: handler (in-process)", decoded_and_handled - decode, UNIT),
            Result(f"{name}: encode (in-process)", encode, UNIT),
        ]
    return results


def _stages(name: str) -> None:
    """Under valgrind: the three stages of one request on a broker's loop, each in its own C function."""
    import anyio.from_thread

    from odradek import Broker
    from odradek.broker.kafka_apis import HANDLERS
    from odradek.protocol.api import decode_request, encode_response

    api_key, version, body = KINDS[name]
    frame = bytes(encode_request(api_key, version, 1, body)[4:])
    handler = HANDLERS[api_key]
    with tempfile.TemporaryDirectory() as log_dir, Broker(log_dir=log_dir) as broker:
        server = broker.server

        async def set_up() -> None:
            await HANDLERS[ApiKey.CreateTopics].handle(server, decode_request(bytearray(encode_request(ApiKey.CreateTopics, 5, 1, _create_body(TOPIC, SMALL))[4:])))
            HANDLERS[ApiKey.Produce].handle(server, decode_request(bytearray(encode_request(ApiKey.Produce, 9, 1, _produce_body(SMALL, ONE_RECORD))[4:])))

        anyio.from_thread.run(set_up, token=broker._token)
        time.sleep(3)  # the start's deferred work done before counting
        answer = anyio.from_thread.run_sync(lambda: handler.handle(server, decode_request(bytearray(frame))), token=broker._token)

        def stages() -> None:
            for _ in range(WARM_UP):
                handler.handle(server, decode_request(bytearray(frame)))
                encode_response(api_key, version, 1, answer)
            functools.reduce(lambda _, __: decode_request(bytearray(frame)), range(REQUESTS), None)
            sorted(range(REQUESTS), key=lambda _: (handler.handle(server, decode_request(bytearray(frame))), 0)[1])
            min(range(REQUESTS), key=lambda _: (encode_response(api_key, version, 1, answer), 0)[1])

        anyio.from_thread.run_sync(stages, token=broker._token)


def run() -> list[Result]:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: no instruction counts", file=sys.stderr)
        return []
    return through_socket() + in_process()


if __name__ == "__main__":
    if sys.argv[1:2] == ["_stages"]:
        _stages(sys.argv[2])
    else:
        for stage in sys.argv[1:] or ["through_socket", "in_process"]:
            for result in globals()[stage]():
                print(f"{result.value / 1000:9.1f}k  {result.name}")
