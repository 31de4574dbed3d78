"""The fault-injection run of issue #11 (scripts/chaos.py is its command line): a 3-node cluster
(brook or Apache Kafka), an idempotent acks=all workload from the Java and franz-go drivers,
a seeded nemesis, and a checker of the recorded history.

  workload.py  producers (`produce-stream`), bursts, tailing and group consumers, history files
  nemesis.py   the faults: kill -9 (partition leader, follower, quorum leader), SIGSTOP, SIGTERM,
               restart after heavy writes, network isolation (netfault.py), partition
               reassignment (reassign.py), controller voter changes (voters.py)
  reassign.py  kafka-reassign-partitions moves for the nemesis
  voters.py    kafka-metadata-quorum remove-controller / add-controller for the nemesis
  netfault.py  isolating a broker on loopback: per-node cgroups + nftables `socket cgroupv2`
  checker.py   rules over the history (lost, duplicated, reordered, read-then-vanished, ...)
  replicas.py  replicas compared on disk: batch headers (offsets, epochs, CRCs) below the HW
  run.py       one run end to end and its report
"""
