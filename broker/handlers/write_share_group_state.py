"""WriteShareGroupState (KIP-932): a share-partition leader asks the share coordinator; see share_group_state.py."""

from __future__ import annotations

from functools import partial

from odradek.broker.handlers.share_group_state import serve
from odradek.protocol.api import ApiKey

handle = partial(serve, ApiKey.WriteShareGroupState)
