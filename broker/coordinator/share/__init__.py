"""The share coordinator: share-partition state in ``__share_group_state`` (KIP-932)."""
