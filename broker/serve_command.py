"""``odradek serve [server.properties] [--override key=value ...]``, as Kafka's kafka-server-start.sh."""

from __future__ import annotations

import argparse
import logging
import sys

from odradek.broker.config import BrokerConfig, parse_overrides
from odradek.storage.config_types import ConfigError

log = logging.getLogger("odradek")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("properties", nargs="?", help="a server.properties file (Kafka's key names)")
    parser.add_argument("--override", action="append", default=[], metavar="key=value", help="override a property")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")


def main(args: argparse.Namespace) -> int:
    """Start-up failures are one line and exit status 1, as Kafka's ``Exiting Kafka due to fatal exception
    during startup``; the traceback only at DEBUG, since the line says what the operator must fix."""
    logging.basicConfig(
        level=args.log_level.upper(),
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
        stream=sys.stdout,
    )
    try:
        overrides = parse_overrides(args.override)
        config = BrokerConfig.load(args.properties, overrides)
    except ConfigError as exc:
        print(f"odradek: invalid configuration: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"odradek: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1
    from odradek.broker.runner import StartupError, run_forever

    try:
        run_forever(config)
    except StartupError as exc:
        log.debug("Start-up failure", exc_info=True)
        log.error("Exiting odradek due to fatal exception during startup: %s", exc)
        return 1
    return 0
