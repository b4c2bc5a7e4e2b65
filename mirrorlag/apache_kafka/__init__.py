"""Apache Kafka and MirrorMaker 2 themselves, from Maven Central, on this machine's loopback: the
truth the real-Kafka test tier and `mirrorlag demo --kafka apache` run against (jars.py resolves
the pinned versions, processes.py runs them, mm2_config.py holds the keys a single-node pair needs)."""
