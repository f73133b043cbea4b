"""Kafka's command-line tools run in a JVM that stays up between calls (``ToolRunner.java`` beside this file),
and so do the tests' Java programs that are fit for it (``kafka_jvm.JavaPrograms.run(..., lasting=True)``).

A tool's own JVM costs ~1.5 s even with a class-data archive, most of it loading the classes the last one
loaded; the suite runs hundreds. :func:`run` hands a tool's main class, arguments and standard input to a
runner JVM of the calling process and jar set, and answers what ``subprocess.run(..., capture_output=True,
text=True)`` of the tool's own JVM answers: the exit code, standard output and standard error, decoded the
same way. What keeps that faithful (exits, shutdown hooks, the clients' id sequences, a JVM left unfit by a
call) is ToolRunner's docstring.

A runner serves one call at a time: concurrent calls (a test running two tools side by side) each take an
idle runner or start another. Runners start on first use and stop when the process exits; a call that does
not end within its timeout kills its runner and raises :class:`subprocess.TimeoutExpired`, as
``subprocess.run`` does. ``ODRADEK_TOOL_JVM=0`` turns runners off: every tool runs in a JVM of its own.
"""

from __future__ import annotations

import atexit
import hashlib
import locale
import os
import re
import select
import shutil
import struct
import subprocess as sp
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Sequence

ENV = "ODRADEK_TOOL_JVM"
SOURCE = Path(__file__).with_name("ToolRunner.java")
MAGIC = 0x0D7AD3C0
RETIRE = 1
STARTUP_TIMEOUT_S = 120.0


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def text_encoding() -> str:
    """The encoding ``subprocess.run(text=True)`` decodes a child's output with (and encodes its input with)."""
    return "utf-8" if sys.flags.utf8_mode else locale.getencoding()


def decoded(data: bytes) -> str:
    """``data`` as ``subprocess.run(text=True)`` returns it: decoded, with universal newlines."""
    return data.decode(text_encoding()).replace("\r\n", "\n").replace("\r", "\n")


RUNNER_FRAME = re.compile(r"^(\t*)at ToolRunner\$ToolThread\.run\([^)]*\)$")
HEADER = re.compile(r"^(\t*)(Caused by|Suppressed): ")
MORE = re.compile(r"^(\t*)\.\.\. (\d+) more$")


def without_runner_frame(text: str) -> str:
    """``text`` with the one stack frame a separate JVM would not print taken out of every stack trace in it
    (Throwable.printStackTrace's format): the runner's tool thread below the tool's main.

    A trace's cause (or suppressed exception) is printed without the frames it shares with the trace that
    encloses it, counted in "... n more". When both end in the tool's main thread, that count includes the
    runner's frame, and a separate JVM's is one less (no line at all when it would be "... 0 more")."""
    if "ToolRunner$ToolThread" not in text:
        return text
    ends_in_runner: dict[int, bool] = {}
    """By the depth (tabs) of its frames: whether the last trace printed at that depth ends in the runner's frame."""
    encloser_ends_in_runner: dict[int, bool] = {}
    lines = []
    for line in text.split("\n"):
        if frame := RUNNER_FRAME.match(line):
            ends_in_runner[len(frame.group(1))] = True
            continue
        if header := HEADER.match(line):
            depth = len(header.group(1)) + 1
            encloser_depth = depth if header.group(2) == "Caused by" else depth - 1
            encloser_ends_in_runner[depth] = ends_in_runner.get(encloser_depth, False)
            ends_in_runner[depth] = False
        elif more := MORE.match(line):
            depth = len(more.group(1))
            if encloser_ends_in_runner.get(depth, False):
                ends_in_runner[depth] = True
                shared = int(more.group(2)) - 1
                if shared == 0:
                    continue
                line = f"{more.group(1)}... {shared} more"
        elif not line.startswith("\t"):
            ends_in_runner.clear()
            encloser_ends_in_runner.clear()
        lines.append(line)
    return "\n".join(lines)


_compile_lock = threading.Lock()


def compiled(cache: Path) -> Path:
    """The folder of ToolRunner's class, compiled once per source and JDK (by whichever process is first)."""
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("no `javac` on PATH: install a Java 17 JDK (make test does), or set ODRADEK_TOOL_JVM=0")
    digest = hashlib.sha256(SOURCE.read_bytes() + os.path.realpath(javac).encode()).hexdigest()[:16]
    classes = cache / f"tool-runner-{digest}"
    with _compile_lock:
        if not (classes / "ToolRunner.class").exists():
            temp = Path(tempfile.mkdtemp(prefix=f"{classes.name}.", dir=cache))
            done = sp.run([javac, "-Xlint:all", "-Werror", "-d", str(temp), str(SOURCE)], capture_output=True, text=True, timeout=STARTUP_TIMEOUT_S)
            if done.returncode != 0:
                shutil.rmtree(temp, ignore_errors=True)
                raise RuntimeError(f"javac of {SOURCE.name} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
            try:
                os.rename(temp, classes)
            except OSError:  # another process put it there first
                shutil.rmtree(temp, ignore_errors=True)
    return classes


class Runner:
    """One runner JVM, a child of the process that started it."""

    def __init__(self, command: list[str]) -> None:
        self.owner = os.getpid()
        descriptor, name = tempfile.mkstemp(prefix="odradek-tool-runner-", suffix=".log")
        self.log = Path(name)
        with open(descriptor, "wb") as log:
            self.proc = sp.Popen(command, stdin=sp.PIPE, stdout=sp.PIPE, stderr=log, start_new_session=True)
        self.pending = b""
        try:
            (magic,) = struct.unpack(">i", self.read(4, time.monotonic() + STARTUP_TIMEOUT_S))
            if magic != MAGIC:
                raise RuntimeError(f"tool runner answered {magic:#x} on start")
        except BaseException:
            self.stop()
            raise

    def read(self, n: int, deadline: float) -> bytes:
        """``n`` bytes of the runner's answer; TimeoutError at ``deadline``, RuntimeError if it dies."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        readable = select.poll()  # not select.select: a busy test process holds descriptors past 1024
        readable.register(fd, select.POLLIN)
        while len(self.pending) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not readable.poll(left * 1000):
                raise TimeoutError
            chunk = os.read(fd, max(65536, n - len(self.pending)))
            if not chunk:
                self.proc.wait(30)
                raise RuntimeError(f"tool runner exited {self.proc.returncode} in a call:\n{self.log.read_text(errors='replace')[-4000:]}")
            self.pending += chunk
        data, self.pending = self.pending[:n], self.pending[n:]
        return data

    def call(self, main_class: str, args: Sequence[str], stdin: bytes, timeout_s: float) -> tuple[int, bool, bytes, bytes]:
        """(exit code, whether to retire this runner, stdout, stderr) of one tool run."""
        assert self.proc.stdin is not None
        fields = [main_class.encode(), struct.pack(">i", len(args)), *(struct.pack(">i", len(a.encode())) + a.encode() for a in args)]
        request = struct.pack(">i", len(fields[0])) + b"".join(fields) + struct.pack(">i", len(stdin)) + stdin
        self.proc.stdin.write(request)
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout_s
        magic, code, flags = struct.unpack(">iii", self.read(12, deadline))
        if magic != MAGIC:
            raise RuntimeError(f"tool runner answered {magic:#x}")
        out = self.read(struct.unpack(">i", self.read(4, deadline))[0], deadline)
        err = self.read(struct.unpack(">i", self.read(4, deadline))[0], deadline)
        return code & 0xFF, bool(flags & RETIRE), out, err

    def stop(self) -> None:
        """Kill by PID (between calls there is nothing in it to shut down cleanly)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        self.log.unlink(missing_ok=True)


_lock = threading.Lock()
_idle: dict[tuple[str, ...], list[Runner]] = {}
_running: set[Runner] = set()


def _key(command: list[str]) -> tuple[str, ...]:
    """Runners are shared by calls of one process (not a forked child) in one working directory."""
    return (str(os.getpid()), os.getcwd(), *command)


def _take(command: list[str]) -> Runner:
    with _lock:
        idle = _idle.setdefault(_key(command), [])
        while idle:
            runner = idle.pop()
            if runner.proc.poll() is None:
                return runner
            _running.discard(runner)
            runner.stop()
    runner = Runner(command)
    with _lock:
        _running.add(runner)
    return runner


def _give_back(command: list[str], runner: Runner) -> None:
    with _lock:
        _idle.setdefault(_key(command), []).append(runner)


def _retire(runner: Runner) -> None:
    with _lock:
        _running.discard(runner)
    runner.stop()


@atexit.register
def stop_all() -> None:
    with _lock:
        runners = [r for r in _running if r.owner == os.getpid()]
        _running.clear()
        _idle.clear()
    for runner in runners:
        runner.stop()


def run(jvm: Sequence[str], cp: str, exit_class: str, main_class: str, args: Sequence[str], *, input: str | None, timeout_s: float, command: list[str], cache: Path) -> sp.CompletedProcess[str] | None:
    """The tool ``main_class`` run by a runner JVM started as ``java *jvm -cp cp:<runner>``, whose Kafka
    ``Exit`` class is ``exit_class``; ``command`` is the tool's own JVM's command line (the answer's
    ``args``). None when runners are off (``ODRADEK_TOOL_JVM=0``): the caller then runs the tool's own JVM."""
    if not enabled():
        return None
    runner_command = ["java", *jvm, "-cp", os.pathsep.join([cp, str(compiled(cache))]), "ToolRunner", exit_class]
    runner = _take(runner_command)
    stdin = b"" if input is None else input.encode(text_encoding())
    try:
        code, retire, out, err = runner.call(main_class, args, stdin, timeout_s)
    except TimeoutError:
        _retire(runner)
        raise sp.TimeoutExpired(command, timeout_s) from None
    except BaseException:
        _retire(runner)
        raise
    if retire:
        _retire(runner)
    else:
        _give_back(runner_command, runner)
    return sp.CompletedProcess(command, code, without_runner_frame(decoded(out)), without_runner_frame(decoded(err)))
