"""A pending ``state reset``: a marker file in the table's folder; the commit that applies it records its id, so a run that
dies before removing the marker does not apply it twice."""

from __future__ import annotations

import json
import os
import uuid
from contextlib import suppress
from typing import TYPE_CHECKING

from source_framework.destinations.spark.atomic_files import write_atomically

if TYPE_CHECKING:
    from source_framework.destinations.checkpoint_record import CheckpointRecord

RESET_MARKER = "_sf_reset.json"


class ResetMarker:
    """The reset methods of a table class that has a local ``path`` and a ``last_checkpoint()``."""

    path: str

    def last_checkpoint(self) -> CheckpointRecord | None:
        raise NotImplementedError

    def request_reset(self) -> str:
        """Mark the table: the stream's next sync from an empty state replaces it."""
        reset_id = uuid.uuid4().hex
        os.makedirs(self.path, exist_ok=True)
        write_atomically(os.path.join(self.path, RESET_MARKER), json.dumps({"reset_id": reset_id}).encode())
        return reset_id

    def pending_reset(self) -> str | None:
        try:
            with open(os.path.join(self.path, RESET_MARKER), encoding="utf-8") as handle:
                reset_id = json.load(handle).get("reset_id")
        except (FileNotFoundError, ValueError):
            return None
        last = self.last_checkpoint()
        if last is not None and last.reset_id == reset_id:
            self.clear_reset()  # applied by a run that died before removing the marker
            return None
        return reset_id

    def clear_reset(self) -> None:
        with suppress(FileNotFoundError):
            os.remove(os.path.join(self.path, RESET_MARKER))
