"""Partitions and their replicas (Kafka's ``ReplicaManager`` and ``kafka.cluster.Partition``): the replica
manager, the one door to partitions and logs; the partitions themselves; the delayed-operation purgatory;
replica fetchers; the leader's ISR changes sent to the controller; log-directory failure; new logs; and
incremental fetch sessions."""
