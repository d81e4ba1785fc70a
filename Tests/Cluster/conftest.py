"""Fixtures of the end-to-end tests (helpers in cluster_harness.py)."""

import pytest

from cluster_harness import Cluster, assert_clean_stop


@pytest.fixture(scope="session")
def cluster():
    """The cluster shared by the tests that leave it running; stopped with Ctrl-C at the end of the session."""
    running = Cluster()
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)
