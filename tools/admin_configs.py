"""``odradek configs``: kafka-configs.sh without a JVM, for topics and brokers (--describe, --alter with
--add-config / --delete-config, --entity-default for the cluster-wide broker defaults).

Prints what Kafka 3.9's ConfigCommand prints: "Dynamic configs for topic t are:" (or "All configs" with
--all, "Default configs for brokers in the cluster are:"), one ``  name=value sensitive=... synonyms={...}``
line per config sorted by name, and "Completed updating config for topic t." A broker's configs are altered
as ConfigCommand alters them, with AlterConfigs replacing the broker's whole dynamic set; a topic's with
IncrementalAlterConfigs. A refusal prints "Error while executing config command with args '...'" and the
broker's reason on stderr, exit code 1.
"""

from __future__ import annotations

import argparse
import re
import sys

from odradek.broker.network.kafka_client import KafkaClient
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.tools.admin_common import (
    CONFIG_SOURCES,
    BrokerError,
    CommandError,
    ConfigEntry,
    add_bootstrap_server,
    describe_configs,
    broker_error,
    print_error,
    run_command,
    topic_metadata,
)

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
SET, DELETE = 0, 1
DEFAULT_ENTITY = "<default>"
_ADD_CONFIG_SPLIT = re.compile(r",(?=[^\]]*(?:\[|$))")
_KEY_VALUE_SPLIT = re.compile(r"\s*=\s*(?=[^\]]*(?:\[|$))")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_server(parser)
    parser.add_argument("--entity-type", required=True, choices=("topics", "brokers"), help="Type of entity.")
    name = parser.add_mutually_exclusive_group()
    name.add_argument("--entity-name", help="Name of entity (a topic name, a broker id).")
    name.add_argument("--entity-default", action="store_true", help="The cluster-wide default (brokers only).")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    action.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    parser.add_argument("--all", action="store_true", help="With --describe: all configs, not only the dynamic ones.")
    parser.add_argument("--add-config", help="Key=value pairs to add, comma separated; list values in square brackets: k1=v1,k2=[v1,v2].")
    parser.add_argument("--delete-config", action="append", default=[], help="Config keys to remove.")


def main(args: argparse.Namespace) -> int:
    argv = " ".join(sys.argv[2:])
    if args.entity_default and args.entity_type != "brokers":
        print_error("--entity-default is only allowed with --entity-type brokers")
        return 1
    if args.alter and not args.entity_name and not args.entity_default:
        print_error("an entity name must be specified with --alter of topics, brokers")
        return 1
    command = describe if args.describe else alter

    def report(exc: Exception) -> None:
        """ConfigCommand prints its own checks' message alone, anything else after the command line."""
        print_error(f"Error while executing config command with args '{argv}'\n{exc}" if isinstance(exc, BrokerError) else str(exc))

    return run_command(args, command, report)


def parse_configs_to_add(raw: str | None) -> dict[str, str]:
    """ConfigCommand.parseConfigsToBeAdded: commas outside square brackets separate pairs; brackets go."""
    if not raw:
        return {}
    pairs = [_KEY_VALUE_SPLIT.split(item) for item in _ADD_CONFIG_SPLIT.split(raw)]
    if any(len(pair) != 2 for pair in pairs):
        raise CommandError('requirement failed: Invalid entity config: all configs to be added must be in the format "key=val".')
    return {key.strip(): re.sub(r"\[?\]?", "", value).strip() for key, value in pairs}


def _resource(entity_type: str, name: str) -> tuple[int, str, int]:
    """(resource type, resource name, the dynamic source the entity's own configs have)."""
    if entity_type == "topics":
        return TOPIC_RESOURCE, name, DYNAMIC_TOPIC_CONFIG
    if name == DEFAULT_ENTITY:
        return BROKER_RESOURCE, "", DYNAMIC_DEFAULT_BROKER_CONFIG
    try:
        int(name)
    except ValueError:
        raise CommandError(f"The entity name for brokers must be a valid integer broker id, found: {name}") from None
    return BROKER_RESOURCE, name, DYNAMIC_BROKER_CONFIG


async def resource_configs(client: KafkaClient, entity_type: str, name: str, describe_all: bool) -> list[ConfigEntry]:
    """ConfigCommand.getResourceConfig: the entity's own dynamic configs (all with --all), sorted by name."""
    resource_type, resource_name, own_source = _resource(entity_type, name)
    entries = await describe_configs(client, resource_type, resource_name)
    return sorted((e for e in entries if describe_all or e.source == own_source), key=lambda e: e.name)


def _value(value: str | None) -> str:
    return "null" if value is None else value


async def describe(client: KafkaClient, args: argparse.Namespace) -> None:
    if args.entity_default:
        entities = [DEFAULT_ENTITY]
    elif args.entity_name is not None:
        entities = [args.entity_name]
    elif args.entity_type == "topics":
        entities = list(await topic_metadata(client))
    else:
        await client.refresh_metadata([])
        entities = [str(node_id) for node_id in client.nodes] + [DEFAULT_ENTITY]
    for entity in entities:
        if entity == DEFAULT_ENTITY:
            print(f"Default configs for {args.entity_type} in the cluster are:")
        else:
            print(f"{'All' if args.all else 'Dynamic'} configs for {args.entity_type[:-1]} {entity} are:")
        for entry in await resource_configs(client, args.entity_type, entity, args.all):
            synonyms = ", ".join(f"{CONFIG_SOURCES[source]}:{name}={_value(value)}" for name, value, source in entry.synonyms)
            print(f"  {entry.name}={_value(entry.value)} sensitive={str(entry.sensitive).lower()} synonyms={{{synonyms}}}")


async def alter(client: KafkaClient, args: argparse.Namespace) -> None:
    name = DEFAULT_ENTITY if args.entity_default else args.entity_name
    to_add = parse_configs_to_add(args.add_config)
    to_delete = [k.strip() for k in args.delete_config]
    old = {e.name: e for e in await resource_configs(client, args.entity_type, name, False)}
    invalid = [k for k in to_delete if k not in old]
    if invalid:
        raise CommandError(f"Invalid config(s): {','.join(invalid)}")
    resource_type, resource_name, _ = _resource(args.entity_type, name)
    if args.entity_type == "topics":
        ops = [{"name": k, "config_operation": SET, "value": v} for k, v in to_add.items()]
        ops += [{"name": k, "config_operation": DELETE, "value": ""} for k in to_delete]
        body = {"resources": [{"resource_type": resource_type, "resource_name": resource_name, "configs": ops}], "validate_only": False}
        result = (await client.request(ApiKey.IncrementalAlterConfigs, body)).responses[0]
    else:
        entries = {k: e.value for k, e in old.items()} | to_add
        for k in to_delete:
            entries.pop(k, None)
        sensitive = [k for k, v in entries.items() if v is None]
        if sensitive:
            raise CommandError(f"All sensitive broker config entries must be specified for --alter, missing entries: Set({', '.join(sensitive)})")
        configs = [{"name": k, "value": v} for k, v in entries.items()]
        body = {"resources": [{"resource_type": resource_type, "resource_name": resource_name, "configs": configs}], "validate_only": False}
        result = (await client.request(ApiKey.AlterConfigs, body)).responses[0]
    if result.error_code != ErrorCode.NONE:
        raise broker_error(result.error_code, result.error_message)
    if name == DEFAULT_ENTITY:
        print(f"Completed updating default config for {args.entity_type} in the cluster.")
    else:
        print(f"Completed updating config for {args.entity_type[:-1]} {name}.")
