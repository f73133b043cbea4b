"""The group coordinator (Kafka's ``kafka.coordinator.group``): groups and their state machine, the
sans-IO coordinator, and the offsets topic's records and their loading."""
