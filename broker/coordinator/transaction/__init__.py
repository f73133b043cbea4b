"""The transaction coordinator (Kafka's ``kafka.coordinator.transaction``): transactions' state, the
transaction log's records, the markers sent to partition leaders, and the verification of a producer's
partitions (KIP-890)."""
