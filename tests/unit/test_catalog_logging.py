"""pyiceberg's warnings after a lost commit: those for staged files the catalog deleted first
(supervisor/lake/catalog.py discard) are dropped; any other failure is still logged."""

from __future__ import annotations

import logging
import sys

import pytest

import supervisor.lake.catalog  # noqa: F401 (installs the filter)

LOGGER = "pyiceberg.table.update.snapshot"


def _warn(error: Exception) -> None:
    try:
        raise error
    except Exception:
        logging.getLogger(LOGGER).warning(
            "Failed to delete uncommitted manifest: %s", "/deep/m0.avro", exc_info=sys.exc_info()
        )


def test_only_files_already_gone_are_not_warned_of(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        _warn(FileNotFoundError("Cannot delete file '/deep/m0.avro'"))
        assert caplog.records == []
        _warn(PermissionError("Cannot delete file '/deep/m0.avro'"))
    assert [r.exc_info[1].__class__ for r in caplog.records if r.exc_info] == [PermissionError]
