"""Logging set-up for the service and the CLI's long-running commands."""

from __future__ import annotations

import logging


def configure_logging(level: str = "info") -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
