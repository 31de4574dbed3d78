"""Brook's system-test harness: broker processes, client drivers, Kafka CLI tools.

Modules: `paths` (locations, BROOK_TEST_TARGET), `broker` (one broker process: start, stop,
kill, restart), `drivers` (run a client's driver; the client capability table), `kafka_cli`
(Apache Kafka's command-line tools). The pytest fixtures live in ../conftest.py.
"""
