"""The ``odradek`` command: ``serve`` as Kafka's ``kafka-server-start.sh``, and operator tools."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# Subcommand → module with ``add_arguments(parser)`` and ``main(args) -> int``.
COMMANDS = {
    "serve": ("odradek.broker.serve_command", "Start a broker: odradek serve [server.properties] [--override key=value ...]"),
    "dump-log": ("odradek.tools.dump_log", "Print the contents of log segments and indexes (as kafka-dump-log.sh)"),
    "perf": ("odradek.tools.perf", "Producer and consumer load tests (as kafka-producer-perf-test / kafka-consumer-perf-test)"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="odradek", description="odradek: an Apache Kafka broker in Python")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        module.add_arguments(p)
        p.set_defaults(_main=module.main)
    args = parser.parse_args(argv)
    if not hasattr(args, "_main"):
        parser.error(f"{args.command} is not available in this installation")
    return args._main(args) or 0


if __name__ == "__main__":
    sys.exit(main())
