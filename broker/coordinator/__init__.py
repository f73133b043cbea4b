"""The coordinator runtime (:mod:`.runtime`) and the partitions it writes to and loads from (:mod:`.partitions`)."""
