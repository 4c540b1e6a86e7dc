"""Test-wide settings: two worker threads, as on the target machine, so that a schedule
that parallelises a step really runs concurrently (races hide on one thread)."""

import os
import sys

os.environ.setdefault("TVM_NUM_THREADS", "2")
sys.path.insert(0, os.path.dirname(__file__))
