"""Share groups' partitions (KIP-932): which records of a partition are in flight to a share group's
consumers, acquired under a time lock, acknowledged, redelivered (Kafka's ``kafka.server.share``)."""
