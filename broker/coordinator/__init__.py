"""The coordinators: the coordinator runtime (:mod:`.runtime`) and the partitions it writes to and loads from
(:mod:`.partitions`), the sans-IO helpers they share (:mod:`.deferred`, :mod:`.timers`), and the two
coordinators built on them, :mod:`.group` and :mod:`.transaction`."""
