"""The checkpoint settings a comparison runs: each interval at every concurrency level and read-ahead bound given."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

CONFIG_KEY = "state_checkpoint_interval"
CONCURRENCY_KEY = "concurrency_level"
AHEAD_KEY = "max_checkpoints_ahead"
NONE_WORDS = ("none", "null", "slice", "slices")


@dataclass(frozen=True)
class Setting:
    """One checkpoint interval to compare (``None``: slice-level checkpoints only)."""

    interval: int | None
    concurrency: int | None = None
    ahead: int | None = None

    @property
    def interval_label(self) -> str:
        return "none" if self.interval is None else str(self.interval)

    @property
    def axes_label(self) -> str:
        concurrency = "" if self.concurrency is None else f" c{self.concurrency}"
        return concurrency + ("" if self.ahead is None else f" a{self.ahead}")

    @property
    def label(self) -> str:
        return self.interval_label + self.axes_label

    @property
    def slug(self) -> str:
        slug = "interval-none" if self.interval is None else f"interval-{self.interval}"
        return slug + self.axes_label.replace(" ", "-")

    def apply(self, config: Mapping[str, Any]) -> dict[str, Any]:
        updated = copy.deepcopy(dict(config))
        updated[CONFIG_KEY] = self.interval
        if self.concurrency is not None:
            updated[CONCURRENCY_KEY] = self.concurrency
        if self.ahead is not None:
            updated[AHEAD_KEY] = self.ahead
        return updated


def parse_intervals(text: str) -> list[Setting]:
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
    """Each setting at each concurrency level of ``"1,4"`` (interval-major); unchanged when ``text`` is empty."""
    return _each(settings, "concurrency", text, "--concurrency", "1,4")


def with_read_ahead(settings: list[Setting], text: str | None) -> list[Setting]:
    """Each setting at each ``max_checkpoints_ahead`` bound of ``"128,1"`` (varying fastest); unchanged when ``text`` is empty."""
    return _each(settings, "ahead", text, "--max-checkpoints-ahead", "128,1")


def _each(settings: list[Setting], axis: str, text: str | None, flag: str, example: str) -> list[Setting]:
    if not text or not text.strip():
        return settings
    values = _whole_numbers(text, flag, example)
    return [replace(s, **{axis: value}) for s in settings for value in values]


def _whole_numbers(text: str, flag: str, example: str) -> list[int]:
    numbers: list[int] = []
    for part in (piece.strip() for piece in text.split(",") if piece.strip()):
        try:
            number = int(part)
        except ValueError:
            raise ValueError(f"{flag}: {part!r} is not a whole number") from None
        if number <= 0:
            raise ValueError(f"{flag}: {number} must be positive")
        if number in numbers:
            raise ValueError(f"{flag}: {number} is given twice")
        numbers.append(number)
    if not numbers:
        raise ValueError(f"{flag}: {text!r} names no value; give e.g. {example}")
    return numbers
