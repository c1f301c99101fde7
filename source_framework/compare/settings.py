"""The checkpoint settings a comparison runs: ``--intervals none,10000,1000,100``, each at
every ``--concurrency`` level given (``--concurrency 1,4``: interval x concurrency).

``none`` checkpoints only when a slice (and the stream) completes; a number N also checkpoints
every N records inside a slice. A setting is applied by writing the config's
``state_checkpoint_interval`` key, the key the demo connector (and any connector built the same
way) reads its streams' interval from, and ``concurrency_level``, which the runtime reads.

Usage::

    settings = parse_intervals("none,1000,100")
    settings[1].label, settings[1].interval        # ("1000", 1000)
    config = settings[1].apply(base_config)         # a copy with state_checkpoint_interval = 1000
    with_concurrency(settings, "1,4")[1].label      # "none c4"
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CONFIG_KEY = "state_checkpoint_interval"
CONCURRENCY_KEY = "concurrency_level"
NONE_WORDS = ("none", "null", "slice", "slices")


@dataclass(frozen=True)
class Setting:
    """One checkpoint interval to compare (``None``: slice-level checkpoints only)."""

    interval: int | None
    #: slices read at once (None: what the config says)
    concurrency: int | None = None

    @property
    def interval_label(self) -> str:
        return "none" if self.interval is None else str(self.interval)

    @property
    def label(self) -> str:
        interval = self.interval_label
        return interval if self.concurrency is None else f"{interval} c{self.concurrency}"

    @property
    def slug(self) -> str:
        """A file-name-safe name, for the setting's working folder."""
        slug = "interval-none" if self.interval is None else f"interval-{self.interval}"
        return slug if self.concurrency is None else f"{slug}-c{self.concurrency}"

    def apply(self, config: Mapping[str, Any]) -> dict[str, Any]:
        updated = copy.deepcopy(dict(config))
        updated[CONFIG_KEY] = self.interval
        if self.concurrency is not None:
            updated[CONCURRENCY_KEY] = self.concurrency
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


def with_concurrency(settings: list[Setting], text: str | None) -> list[Setting]:
    """Each setting at each concurrency level of ``"1,4"`` (interval-major); ``settings`` as they
    are when ``text`` is None or empty. ValueError on anything but positive whole numbers."""
    if not text or not text.strip():
        return settings
    levels: list[int] = []
    for part in (piece.strip() for piece in text.split(",") if piece.strip()):
        try:
            level = int(part)
        except ValueError:
            raise ValueError(f"--concurrency: {part!r} is not a whole number") from None
        if level <= 0:
            raise ValueError(f"--concurrency: {level} must be positive")
        if level in levels:
            raise ValueError(f"--concurrency: {level} is given twice")
        levels.append(level)
    if not levels:
        raise ValueError(f"--concurrency: {text!r} names no level; give e.g. 1,4")
    return [Setting(s.interval, level) for s in settings for level in levels]
