"""The package's layering: ``protocol`` imports nothing of ours, ``storage`` only ``protocol``, and the
controller no broker (the broker wires itself to the controller, never the other way round).

The wire format and the log format are usable on their own (dump-log, the Spark data source, tests)
only as long as they never reach up into the broker; an import that does would also drag the
broker's event loop and config into every tool. Imports are read with ``ast`` so that an import
inside a function counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "odradek"

# layer -> the layers of ours it may import (itself always allowed)
ALLOWED: dict[str, frozenset[str]] = {
    "protocol": frozenset(),
    "storage": frozenset({"protocol"}),
    "controller": frozenset({"protocol", "storage"}),
}


def imported_layers(path: Path) -> set[tuple[int, str]]:
    """(line, layer) for every import of one of our top-level packages in ``path``."""
    found: set[tuple[int, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: relative import; write it absolute"
            names = [node.module or ""]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == PACKAGE and len(parts) > 1:
                found.add((node.lineno, parts[1]))
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_is_below_it(layer: str) -> None:
    sources = sorted((ROOT / layer).rglob("*.py"))
    assert sources, f"no sources under {layer}/"
    violations = [
        f"{path.relative_to(ROOT)}:{line} imports {PACKAGE}.{imported}"
        for path in sources
        for line, imported in sorted(imported_layers(path))
        if imported != layer and imported not in ALLOWED[layer]
    ]
    assert violations == []


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """Guards the test above against passing because it reads nothing."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from odradek.broker.config import KafkaConfig\n")
    assert imported_layers(module) == {(2, "broker")}


# -- handlers only translate: the replica manager is the one door to partitions and logs -------------------

HANDLERS_DIR = ROOT / "broker" / "handlers"
STORAGE_INTERNALS = frozenset({"log", "producer_state"})
"""Attributes a handler must never read: a partition's log and a log's producer state (ask the replica manager)."""


def storage_reaches(path: Path) -> list[str]:
    """Where a handler imports ``odradek.storage.log`` or reads an attribute named ``log`` or ``producer_state``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name == "odradek.storage.log"]
        elif isinstance(node, ast.ImportFrom):
            if node.module == "odradek.storage.log" or (node.module == "odradek.storage" and any(a.name == "log" for a in node.names)):
                found.append(f"{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Attribute) and node.attr in STORAGE_INTERNALS:
            found.append(f"{node.lineno}: .{node.attr}")
    return found


def test_handlers_never_reach_a_log() -> None:
    sources = sorted(HANDLERS_DIR.glob("*.py"))
    assert len(sources) > 20
    violations = [f"{path.relative_to(ROOT)}:{reach}" for path in sources for reach in storage_reaches(path)]
    assert violations == []


def test_the_handler_checker_sees_a_log(tmp_path: Path) -> None:
    module = tmp_path / "h.py"
    module.write_text(
        "from odradek.storage.log import Log\n"
        "def handle(rm, request):\n"
        "    return rm.get_partition('t', 0).log.log_end_offset, p.log.producer_state\n"
    )
    assert sorted(storage_reaches(module)) == ["1: from odradek.storage.log import ...", "3: .log", "3: .log", "3: .producer_state"]


# -- handlers are checked against their API's generated types ----------------------------------------------


def untyped_requests(path: Path) -> list[str]:
    """Where a module's ``handle`` takes its request without naming the body's type (``Request[<Api>Request]``,
    from ``protocol/message_types``): mypy would then check none of the fields the handler reads."""
    found = []
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "handle":
            request = node.args.args[-1] if node.args.args else None
            annotation = None if request is None else request.annotation
            if not (isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name) and annotation.value.id == "Request"):
                found.append(f"{node.lineno}: handle(..., {'' if request is None else request.arg}: {'?' if annotation is None else ast.unparse(annotation)})")
    return found


def test_handlers_name_their_request_type() -> None:
    sources = sorted(HANDLERS_DIR.glob("*.py"))
    assert len(sources) > 20
    assert [f"{path.relative_to(ROOT)}:{found}" for path in sources for found in untyped_requests(path)] == []


def test_the_request_type_checker_sees_a_bare_request(tmp_path: Path) -> None:
    module = tmp_path / "h.py"
    module.write_text("def handle(rm, request: Request) -> dict:\n    return {}\n\n\ndef helper(request: Request) -> None: ...\n")
    assert untyped_requests(module) == ["1: handle(..., request: Request)"]


LOG_KEEPERS = frozenset({"broker/replication/partition.py", "broker/replication/replica_manager.py"})
"""The broker modules that may hold a partition's log: the partition, and the replica manager that opens
them. The fetchers, coordinators and metrics ask a ``Partition`` (Kafka's fetcher appends and truncates
through ``Partition``, and a coordinator loads through ``ReplicaManager.getLog``)."""


def log_reaches(path: Path) -> list[str]:
    """Where a module reads an attribute named ``log`` (a partition's log)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [f"{node.lineno}: .log" for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "log"]


def test_only_partition_and_replica_manager_reach_a_log() -> None:
    sources = sorted((ROOT / "broker").rglob("*.py"))
    assert {p.relative_to(ROOT).as_posix() for p in sources} >= LOG_KEEPERS | {"broker/replication/replica_fetcher.py"}
    violations = [
        f"{relative}:{reach}"
        for path in sources
        for relative in [path.relative_to(ROOT).as_posix()]
        if relative not in LOG_KEEPERS
        for reach in log_reaches(path)
    ]
    assert violations == []


def test_the_log_checker_sees_a_log(tmp_path: Path) -> None:
    module = tmp_path / "f.py"
    module.write_text(
        "import logging\n"
        "log = logging.getLogger('f')\n"
        "def process(partitions, tp, records):\n"
        "    log.info('appending')\n"
        "    return partitions[tp].log.append_as_follower(records)\n"
    )
    assert log_reaches(module) == ["5: .log"]


# -- one metadata interface: handlers name no mode, and only the start-up code chooses one ------------------

MODE_CLASSES = frozenset({"EmbeddedController", "ZkBroker", "ZkController", "ZkAclStore", "ZkCredentialStore", "FileCredentialStore"})
"""The metadata modes' implementations, and what only one mode has: a handler asks ``MetadataSupport``."""
MODE_NAMES = frozenset({"zk_broker", "in_zookeeper"})
"""Names that carry the mode itself around (the ``zk_broker is None`` tests this interface replaced)."""
MODE_KEY = "zookeeper.connect"
START_UP = {"broker/kafka_server.py": frozenset({"credential_store", "start_metadata_support"})}
"""Where the mode is chosen, once: module -> its functions that may test it."""
MODE_IMPLEMENTATIONS = frozenset({"broker/zk_broker.py"})
"""A mode's own implementation, which reads its configuration (the ZooKeeper to connect to)."""


def names_in(node: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every name and attribute in ``node``, string annotations parsed too."""
    found: list[tuple[int, str]] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.append((sub.lineno, sub.id))
        elif isinstance(sub, ast.Attribute):
            found.append((sub.lineno, sub.attr))
        elif isinstance(sub, ast.alias):
            found.append((sub.lineno, sub.asname or sub.name.rsplit(".", 1)[-1]))
        elif isinstance(sub, ast.arg) and isinstance(sub.annotation, ast.Constant) and isinstance(sub.annotation.value, str):
            found += [(sub.lineno, name) for _, name in names_in(ast.parse(sub.annotation.value, mode="eval"))]
    return found


def mode_classes_named(path: Path) -> list[str]:
    """Where a handler imports or names one of the modes' classes."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [f"{line}: {name}" for line, name in sorted(set(names_in(tree))) if name in MODE_CLASSES]


def mode_tests(path: Path, key_read_allowed: bool = False, allowed_functions: frozenset[str] = frozenset()) -> list[str]:
    """Where a module asks which metadata mode it runs in: reads ``zookeeper.connect``, carries a
    ``zk_broker``, or tests ``isinstance`` of a mode's class; not counted inside ``allowed_functions``."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in allowed_functions:
            return
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == MODE_KEY and not key_read_allowed:
            found.append(f"{node.lineno}: [{MODE_KEY!r}]")
        elif isinstance(node, ast.Name) and node.id in MODE_NAMES or isinstance(node, ast.arg) and node.arg in MODE_NAMES:
            found.append(f"{node.lineno}: {getattr(node, 'id', None) or getattr(node, 'arg')}")
        elif isinstance(node, ast.Attribute) and node.attr in MODE_NAMES:
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" and len(node.args) == 2:
            found.extend(f"{line}: isinstance(..., {name})" for line, name in names_in(node.args[1]) if name in MODE_CLASSES)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return found


def test_handlers_name_no_metadata_mode() -> None:
    sources = sorted(HANDLERS_DIR.glob("*.py"))
    assert len(sources) > 20
    violations = [f"{path.relative_to(ROOT)}:{named}" for path in sources for named in mode_classes_named(path)]
    assert violations == []


def test_the_mode_is_chosen_only_at_start() -> None:
    sources = sorted(p for layer in ("broker", "controller", "tools") for p in (ROOT / layer).rglob("*.py"))
    assert any(p.relative_to(ROOT).as_posix() in START_UP for p in sources)
    violations = [
        f"{relative}:{test}"
        for path in sources
        for relative in [path.relative_to(ROOT).as_posix()]
        for test in mode_tests(path, relative in MODE_IMPLEMENTATIONS, START_UP.get(relative, frozenset()))
    ]
    assert violations == []


def test_the_mode_checkers_see_a_mode(tmp_path: Path) -> None:
    handler = tmp_path / "h.py"
    handler.write_text(
        "from odradek.broker.zk_broker import ZkBroker\n"
        "import odradek.controller.embedded_controller\n"
        "def handle(controller: 'EmbeddedController | None', request):\n"
        "    return odradek.controller.embedded_controller.EmbeddedController\n"
    )
    assert mode_classes_named(handler) == ["1: ZkBroker", "3: EmbeddedController", "4: EmbeddedController"]
    module = tmp_path / "m.py"
    module.write_text(
        "def start(config):\n"
        "    return config['zookeeper.connect']\n"
        "def serve(server, zk_broker):\n"
        "    if server.zk_broker is None or isinstance(server.store, (ZkAclStore, dict)):\n"
        "        return config['zookeeper.connect']\n"
    )
    assert mode_tests(module) == ["2: ['zookeeper.connect']", "3: zk_broker", "4: .zk_broker", "4: isinstance(..., ZkAclStore)", "5: ['zookeeper.connect']"]
    assert mode_tests(module, allowed_functions=frozenset({"start"})) == ["3: zk_broker", "4: .zk_broker", "4: isinstance(..., ZkAclStore)", "5: ['zookeeper.connect']"]
    assert mode_tests(module, key_read_allowed=True, allowed_functions=frozenset({"start"})) == ["3: zk_broker", "4: .zk_broker", "4: isinstance(..., ZkAclStore)"]


# -- no import cycles among our modules; every broker module imports on its own -----------------------------

KNOWN_CYCLES: dict[frozenset[str], str] = {}
"""Cycles left to break, each with why it exists; one that is gone must be removed from here."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def import_graph() -> dict[str, set[str]]:
    """Our modules and the modules of ours each imports, ``TYPE_CHECKING`` and function-level imports
    included: a cycle hidden behind either is still a cycle in the design."""
    paths = {module_name(p): p for layer in (*ALLOWED, "broker", "tools") for p in (ROOT / layer).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            deps.update(t for t in targets if t in paths and t != name)
        graph[name] = deps
    # The dispatch table imports each handler module by its name at the API's first request (Handler.module):
    # imports all the same.
    from odradek.broker.kafka_apis import HANDLERS, HANDLERS_PACKAGE

    graph["odradek.broker.kafka_apis"] |= {f"{HANDLERS_PACKAGE}.{handler.module}" for handler in HANDLERS.values()}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_no_import_cycles() -> None:
    graph = import_graph()
    assert "odradek.broker.kafka_server" in graph and "odradek.broker.handlers.produce" in graph
    found = set(cycles(graph))
    assert sorted(map(sorted, found - KNOWN_CYCLES.keys())) == []
    assert sorted(map(sorted, KNOWN_CYCLES.keys() - found)) == [], "a known cycle is gone: remove it from KNOWN_CYCLES"


def test_the_cycle_finder_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]


IMPORT_ALONE = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.startswith("odradek.broker")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {exc!r}")
print("\\n".join(failed))
"""
"""Imports each module with no broker module loaded before it (protocol, storage and controller stay loaded:
they import no broker module, as the layer test above holds), so an import that works only in some order fails."""


def import_alone_failures(names: list[str]) -> list[str]:
    done = subprocess.run([sys.executable, "-c", IMPORT_ALONE, *names], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_every_broker_module_imports_alone() -> None:
    names = sorted(module_name(p) for p in (ROOT / "broker").rglob("*.py"))
    assert len(names) > 40
    assert import_alone_failures(names) == []


def test_the_import_checker_sees_a_failure() -> None:
    (failure,) = import_alone_failures(["odradek.broker.no_such_module"])
    assert failure.startswith("odradek.broker.no_such_module: ModuleNotFoundError")
