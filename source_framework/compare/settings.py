"""The checkpoint settings a comparison runs: ``--intervals none,10000,1000,100``.

``none`` checkpoints only when a slice (and the stream) completes; a number N also checkpoints
every N records inside a slice. A setting is applied by writing the config's
``state_checkpoint_interval`` key, the key the demo connector (and any connector built the same
way) reads its streams' interval from.

Usage::

    settings = parse_intervals("none,1000,100")
    settings[1].label, settings[1].interval        # ("1000", 1000)
    config = settings[1].apply(base_config)         # a copy with state_checkpoint_interval = 1000
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CONFIG_KEY = "state_checkpoint_interval"
NONE_WORDS = ("none", "null", "slice", "slices")


@dataclass(frozen=True)
class Setting:
    """One checkpoint interval to compare (``None``: slice-level checkpoints only)."""

    interval: int | None

    @property
    def label(self) -> str:
        return "none" if self.interval is None else str(self.interval)

    @property
    def slug(self) -> str:
        """A file-name-safe name, for the setting's working folder."""
        return "interval-none" if self.interval is None else f"interval-{self.interval}"

    def apply(self, config: Mapping[str, Any]) -> dict[str, Any]:
        updated = copy.deepcopy(dict(config))
        updated[CONFIG_KEY] = self.interval
        return updated


def parse_intervals(text: str) -> list[Setting]:
    """``"none,10000,1000,100"`` -> settings in the order given; ValueError on anything else."""
    settings: list[Setting] = []
    for part in (piece.strip() for piece in text.split(",")):
        if not part:
            continue
        if part.lower() in NONE_WORDS:
            setting = Setting(None)
        else:
            try:
                value = int(part.replace("_", ""))
            except ValueError:
                raise ValueError(f"--intervals: {part!r} is neither 'none' nor a whole number") from None
            if value <= 0:
                raise ValueError(f"--intervals: {value} must be positive")
            setting = Setting(value)
        if setting in settings:
            raise ValueError(f"--intervals: {setting.label} is given twice")
        settings.append(setting)
    if not settings:
        raise ValueError("--intervals: give at least one setting, e.g. none,1000")
    return settings
