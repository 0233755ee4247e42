"""The task's side of fencing: the newest overlord epoch it has seen, and what it refuses."""

from __future__ import annotations

import pytest

from tasks.runtime.control import EpochFence
from tasks.runtime.indexer_state import ControlError


def test_commands_of_an_older_epoch_are_refused_reads_are_not() -> None:
    fence = EpochFence()
    fence.admit("3", command=True)
    fence.admit("5", command=False)  # a new leader's first read raises it
    assert fence.seen == 5
    with pytest.raises(ControlError) as refused:
        fence.admit("3", command=True)
    assert refused.value.status_code == 409
    assert "epoch 3 is older than the leader's epoch 5" in refused.value.message
    fence.admit("3", command=False)  # reads of a deposed leader do no harm
    fence.admit("5", command=True)
    fence.admit("6", command=True)
    assert fence.seen == 6


def test_an_epoch_that_is_not_a_number_is_a_bad_request() -> None:
    with pytest.raises(ControlError) as refused:
        EpochFence().admit("six", command=True)
    assert refused.value.status_code == 400
