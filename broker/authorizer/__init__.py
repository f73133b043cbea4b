"""Authorization: Kafka's ACL model (:mod:`.acl`, :mod:`.acl_bindings`) and its ZooKeeper-mode ``AclAuthorizer``
(:mod:`.acl_authorizer`), chosen by ``authorizer.class.name``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.storage.config_types import ConfigError

if TYPE_CHECKING:
    from odradek.broker.authorizer.acl_authorizer import AclAuthorizer, AclStore


def create_authorizer(class_name: str | None, store: "AclStore", super_users: str | None, allow_everyone: bool) -> "AclAuthorizer | None":
    """The authorizer ``authorizer.class.name`` names, or None when it is empty (Kafka: no authorizer,
    everything allowed, the ACL APIs answer SECURITY_DISABLED). KRaft's StandardAuthorizer keeps its ACLs
    in the metadata log, which a ZooKeeper-mode broker does not have (Kafka's broker waits for it forever);
    any other class is not known here. Both refuse start-up rather than run with no authorization."""
    name = (class_name or "").strip()
    if not name:
        return None  # nor is the authorizer's module imported
    from odradek.broker.authorizer.acl_authorizer import ACL_AUTHORIZER, STANDARD_AUTHORIZER, AclAuthorizer

    if name == ACL_AUTHORIZER:
        return AclAuthorizer.from_config(store, super_users, allow_everyone)
    if name == STANDARD_AUTHORIZER:
        raise ConfigError(f"authorizer.class.name={name} needs KRaft's metadata log; in ZooKeeper mode use {ACL_AUTHORIZER}")
    raise ConfigError(f"authorizer.class.name={name} is not an authorizer odradek has; use {ACL_AUTHORIZER}")
