"""``odradek.Broker``: a real broker for tests and applications, in-process or as a subprocess.

Python users otherwise need Docker to test Kafka code. ``with Broker() as b:`` starts a single-node broker
on a free loopback port with a temporary log directory and yields when it accepts connections
(``b.bootstrap``). In-process it runs on its own thread and event loop; ``subprocess=True`` runs
``odradek serve`` in a child process, which tests use to restart or kill -9 a broker.
"""

from __future__ import annotations

import asyncio
import collections
import os
import re
import signal
import subprocess as sp
import sys
import threading
from pathlib import Path
from typing import Any, Mapping

import anyio
import anyio.lowlevel

from odradek.broker.config import BrokerConfig

_BANNER = r"started in \d+ ms: listeners \w+://([^:,\s]+):(\d+)"
"""What ``odradek serve`` prints once it serves (compiled by ``re``'s cache at the first subprocess broker: an
in-process one never reads it)."""


class Broker:
    def __init__(
        self,
        log_dir: str | Path | None = None,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        config: Mapping[str, Any] | None = None,
        subprocess: bool = False,
    ) -> None:
        self._own_dir = log_dir is None
        if log_dir is None:
            import tempfile  # here: it brings shutil, bz2 and lzma (~1.3 ms), which a start naming its directory does not need

            log_dir = tempfile.mkdtemp(prefix="odradek-")
        self.log_dir = Path(log_dir)
        self.host = host
        self.port = port
        self.props = {
            "listeners": f"PLAINTEXT://{host}:{port}",
            "log.dirs": str(self.log_dir),
            "group.initial.rebalance.delay.ms": "0",
        }
        self.props.update({k: str(v) for k, v in (config or {}).items()})
        self.subprocess = subprocess
        self._thread: threading.Thread | None = None
        self._proc: sp.Popen | None = None
        self._stop: anyio.Event | None = None
        self._token: Any = None
        """The loop's anyio token, for tests and benchmarks that run code on the broker's loop."""
        self._loop: Any = None
        self._started = threading.Event()
        self.output: collections.deque[str] = collections.deque(maxlen=2000)
        """The subprocess broker's latest log lines (to explain a failing test)."""
        self.tracebacks: list[str] = []
        """The log line heading each traceback the subprocess broker wrote, all of them (a test asserting that
        no error went unhandled reads these; ``output`` keeps only the latest lines)."""
        self._error: BaseException | None = None
        self.server: Any = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        """The broker process's id (subprocess mode), e.g. to measure its CPU time or memory."""
        if self._proc is None:
            raise RuntimeError("pid is known only for a broker started with subprocess=True")
        return self._proc.pid

    def start(self) -> "Broker":
        if self.subprocess:
            self._start_process()
        else:
            self._start_thread()
        # A restart binds the same port again, so clients reconnect to the same address.
        self.props["listeners"] = f"PLAINTEXT://{self.host}:{self.port}"
        return self

    def _start_thread(self) -> None:
        config = BrokerConfig(self.props)
        self._started.clear()

        async def main() -> None:
            from odradek.broker.runner import run

            self._stop = anyio.Event()
            self._token = anyio.lowlevel.current_token()
            self._loop = asyncio.get_running_loop()

            def started(server: Any, address: tuple[str, int]) -> None:
                self.server = server
                self.port = address[1]
                self._started.set()

            await run(config, handle_signals=False, on_started=started, stop_event=self._stop)

        def target() -> None:
            try:
                anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})
            except BaseException as exc:  # surfaced to the starting thread
                self._error = exc
                self._started.set()

        self._thread = threading.Thread(target=target, name="odradek-broker", daemon=True)
        self._thread.start()
        self._started.wait(30)
        if self._error is not None:
            raise RuntimeError("broker failed to start") from self._error

    def _start_process(self) -> None:
        cmd = [sys.executable, "-m", "odradek", "serve"]
        for key, value in self.props.items():
            cmd += ["--override", f"{key}={value}"]
        self._proc = sp.Popen(cmd, stdout=sp.PIPE, stderr=sp.STDOUT, text=True)
        assert self._proc.stdout is not None
        lines = []
        for line in self._proc.stdout:
            lines.append(line)
            match = re.search(_BANNER, line)
            if match:
                self.port = int(match.group(2))
                threading.Thread(target=self._drain, daemon=True).start()
                return
        raise RuntimeError("broker process exited before accepting connections:\n" + "".join(lines))

    def _drain(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        echo = bool(os.environ.get("ODRADEK_BROKER_OUTPUT"))
        for line in self._proc.stdout:
            if line.startswith("Traceback") and len(self.tracebacks) < 100:
                self.tracebacks.append(self.output[-1] if self.output else line)
            self.output.append(line)
            if echo:
                sys.stderr.write(line)

    def stop(self) -> None:
        """Clean shutdown (SIGTERM for a subprocess)."""
        if self._proc is not None:
            self._proc.send_signal(signal.SIGTERM)
            self._proc.wait(30)
            self._proc = None
        if self._thread is not None:
            if self._stop is not None and self._loop is not None:
                # The loop sets the event (an anyio Event is the loop's own): what anyio.from_thread.run_sync
                # does, without importing anyio.from_thread (3.7 M instructions, ~1 ms) at every start.
                self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(30)
            self._thread = None

    def kill(self) -> None:
        """kill -9: no flush, no checkpoints, no clean-shutdown marker (subprocess mode only)."""
        if self._proc is None:
            raise RuntimeError("kill() needs a broker started with subprocess=True")
        self._proc.kill()
        self._proc.wait(30)
        self._proc = None

    def wait(self, timeout: float) -> int:
        """The subprocess broker's exit status once it exits by itself (a multi-process broker whose worker
        died, say); ``subprocess.TimeoutExpired`` if it has not within ``timeout`` seconds."""
        if self._proc is None:
            raise RuntimeError("wait() needs a broker started with subprocess=True")
        status = self._proc.wait(timeout)
        self._proc = None
        return status

    def restart(self) -> "Broker":
        self.stop()
        return self.start()

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        if self._own_dir:
            import shutil  # here: with bz2 and lzma, which it imports, a few ms of every start

            shutil.rmtree(self.log_dir, ignore_errors=True)
