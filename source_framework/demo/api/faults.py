"""Injected misbehaviour on a predictable schedule, so tests exercise a connector's retry, back-off and state logic."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Faults:
    """What to break, and how often: every Nth data request since the faults were set (0 = never)."""

    rate_limit_every: int = 0
    retry_after: float = 1
    error_every: int = 0
    delay_ms: int = 0
    unsorted_pages: bool = False

    def __post_init__(self) -> None:
        for name in ("rate_limit_every", "error_every", "delay_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0")
        retry_after = self.retry_after
        if isinstance(retry_after, bool) or not isinstance(retry_after, (int, float)) or not retry_after >= 0:  # >= rejects NaN
            raise ValueError("retry_after must be a number >= 0")
        if not isinstance(self.unsorted_pages, bool):
            raise ValueError("unsorted_pages must be a boolean")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def updated(self, changes: Mapping[str, Any]) -> Faults:
        unknown = set(changes) - {field.name for field in dataclasses.fields(self)}
        if unknown:
            raise ValueError(f"unknown fault fields: {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)

    @property
    def retry_after_header(self) -> str:
        """``Retry-After`` value: an integer string when whole (the HTTP form), else a decimal."""
        seconds = float(self.retry_after)
        return str(int(seconds)) if seconds.is_integer() else repr(seconds)

    def fault_for(self, request_number: int) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        """The (status, body, headers) data request ``request_number`` answers instead of its data, or None; a rate limit wins ties."""
        if self.rate_limit_every and request_number % self.rate_limit_every == 0:
            return 429, {"error": "rate limit exceeded"}, {"Retry-After": self.retry_after_header}
        if self.error_every and request_number % self.error_every == 0:
            nth_error = request_number // self.error_every
            if nth_error % 2:
                return 500, {"error": "internal server error (injected)"}, {}
            return 503, {"error": "service unavailable (injected)"}, {}
        return None
