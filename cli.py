"""The ``odradek`` command: ``serve`` as Kafka's ``kafka-server-start.sh``, and operator tools."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys

# A command killed by SIGPIPE exits with 128 + 13, as the shell reports for Unix tools.
SIGPIPE_EXIT = 141

# Subcommand → module with ``add_arguments(parser)`` and ``main(args) -> int``.
COMMANDS = {
    "serve": ("odradek.broker.serve_command", "Start a broker: odradek serve [server.properties] [--override key=value ...]"),
    "dump-log": ("odradek.tools.dump_log", "Print the contents of log segments and indexes (as kafka-dump-log.sh)"),
    "perf": ("odradek.tools.perf", "Producer and consumer load tests (as kafka-producer-perf-test / kafka-consumer-perf-test)"),
    "pipeline": ("odradek.tools.pipeline", "Run a PySpark pipeline shipped with odradek: odradek pipeline clickstream"),
    "topics": ("odradek.tools.admin_topics", "Create, list, describe, alter and delete topics (as kafka-topics.sh)"),
    "configs": ("odradek.tools.admin_configs", "Describe and alter topic and broker configs (as kafka-configs.sh)"),
    "offsets": ("odradek.tools.admin_offsets", "Print partitions' offsets for a time (as kafka-get-offsets.sh)"),
    "console": ("odradek.tools.console.command", "A web console for any Kafka-compatible cluster: odradek console --bootstrap-server host:port"),
    "groups": ("odradek.tools.admin_groups", "List, describe (with lag), delete consumer groups and reset their offsets (as kafka-consumer-groups.sh)"),
}


def main(argv: list[str] | None = None) -> int:
    """Only the chosen command's module is imported: ``odradek serve`` starts without loading the tools."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="odradek", description="odradek: an Apache Kafka broker in Python")
    parser.add_argument("--version", action="version", version=f"odradek {importlib.metadata.version('odradek')} (Apache Kafka 3.9 protocol and log format)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if argv and argv[0] == name:
            module = importlib.import_module(module_name)
            module.add_arguments(p)
            p.set_defaults(_main=module.main)
    args = parser.parse_args(argv)
    try:
        return args._main(args) or 0
    except BrokenPipeError:
        # ``odradek dump-log ... | head``: the reader has what it wanted. End quietly, as Unix tools do;
        # stdout goes to /dev/null so that flushing it at exit does not fail a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return SIGPIPE_EXIT


if __name__ == "__main__":
    sys.exit(main())
