"""The ``odradek`` command: ``serve`` as Kafka's ``kafka-server-start.sh``, and operator tools."""

from __future__ import annotations

import argparse
import importlib
import sys

# Subcommand → module with ``add_arguments(parser)`` and ``main(args) -> int``.
COMMANDS = {
    "serve": ("odradek.broker.serve_command", "Start a broker: odradek serve [server.properties] [--override key=value ...]"),
    "dump-log": ("odradek.tools.dump_log", "Print the contents of log segments and indexes (as kafka-dump-log.sh)"),
    "perf": ("odradek.tools.perf", "Producer and consumer load tests (as kafka-producer-perf-test / kafka-consumer-perf-test)"),
    "pipeline": ("odradek.tools.pipeline", "Run a PySpark pipeline shipped with odradek: odradek pipeline clickstream"),
}


def main(argv: list[str] | None = None) -> int:
    """Only the chosen command's module is imported: ``odradek serve`` starts without loading the tools."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="odradek", description="odradek: an Apache Kafka broker in Python")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if argv and argv[0] == name:
            module = importlib.import_module(module_name)
            module.add_arguments(p)
            p.set_defaults(_main=module.main)
    args = parser.parse_args(argv)
    return args._main(args) or 0


if __name__ == "__main__":
    sys.exit(main())
