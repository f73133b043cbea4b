"""``odradek serve [server.properties] [--override key=value ...]``, as Kafka's kafka-server-start.sh."""

from __future__ import annotations

import argparse
import logging
import sys

from odradek.broker.config import BrokerConfig, parse_overrides
from odradek.storage.config_types import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("properties", nargs="?", help="a server.properties file (Kafka's key names)")
    parser.add_argument("--override", action="append", default=[], metavar="key=value", help="override a property")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level.upper(),
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
        stream=sys.stdout,
    )
    try:
        overrides = parse_overrides(args.override)
        config = BrokerConfig.load(args.properties, overrides)
    except (ConfigError, OSError) as exc:
        print(f"odradek: invalid configuration: {exc}", file=sys.stderr)
        return 1
    from odradek.broker.runner import run_forever

    run_forever(config)
    return 0
