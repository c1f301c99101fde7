"""Keeping config secrets out of logs, errors and state."""

from __future__ import annotations

import logging
import re
from typing import Any, Iterable, List, Mapping

from airbyte_cdk.utils.airbyte_secrets_utils import get_secrets

_SECRET_NAME = re.compile(r"(api[_-]?key|token|secret|password|passwd|credential)", re.IGNORECASE)


def find_secrets(config: Mapping[str, Any], connection_specification: Mapping[str, Any]) -> List[str]:
    """Secret values of a config: fields the spec marks ``airbyte_secret`` and any field whose
    name says it is a key, token, secret or password (a spec can forget to mark one)."""
    found = [str(value) for value in get_secrets(connection_specification, config) if value]

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if isinstance(value, (str, int)) and not isinstance(value, bool) and _SECRET_NAME.search(str(key)):
                    if str(value):
                        found.append(str(value))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(config)
    # Longest first, so a secret that contains another is masked whole.
    return sorted(set(found), key=len, reverse=True)


class SecretFilter:
    """Replaces every secret value in a text with ``****``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = [s for s in secrets if s]

    def mask(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, "****")
        return text

    def contains_secret(self, text: str) -> bool:
        return any(secret in text for secret in self.secrets)


class MaskingLogFilter(logging.Filter):
    """A logging filter that masks secrets in every record's final message."""

    def __init__(self, secrets: SecretFilter) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = self.secrets.mask(message)
        if masked != message:
            record.msg, record.args = masked, ()
        return True
