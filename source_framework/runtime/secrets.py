"""Keeping config secrets out of states, logs and errors.

Secrets are values the spec marks ``airbyte_secret`` plus long strings under a clearly secret name (strict on purpose: a
false match refuses every state holding the same text). Short ones are masked only as whole values, so words stay
readable; ``contains_secret`` matches exactly what ``mask`` changes, so states are refused on what logs mask.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from re import Pattern
from typing import Any
from urllib.parse import quote, quote_plus

from airbyte_cdk.utils import airbyte_secrets_utils

#: Secrets at least this long are masked anywhere; shorter spec secrets only as whole values.
MIN_SECRET_LENGTH = 8
MASK = "****"

_SECRET_NOUNS = frozenset({"password", "passwd", "passphrase", "secret", "token", "apikey", "credential", "credentials"})
_KEY_KINDS = frozenset(
    {"api", "access", "secret", "private", "client", "signing", "encryption", "auth", "app", "consumer", "master",
     "license", "subscription", "developer", "ssh", "service", "account", "admin", "write", "read"}
)
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_COMBINATORS = ("oneOf", "anyOf", "allOf")


def is_secret_name(name: str) -> bool:
    """A config key that clearly holds a secret: its last word a secret noun, or its last two a kind of key (``api_key``)."""
    words = [word.lower() for word in _WORDS.findall(name)]
    if not words:
        return False
    if words[-1] in _SECRET_NOUNS:
        return True
    return len(words) >= 2 and words[-1] in ("key", "keys") and words[-2] in _KEY_KINDS


def find_secrets(config: Mapping[str, Any], connection_specification: Mapping[str, Any]) -> list[str]:
    """The secret values of a config, longest first (so a secret containing another is masked whole)."""
    found = set(_leaf_texts(_spec_secret_values(connection_specification, config)))
    found.update(text for text in _named_secret_values(config) if len(text) >= MIN_SECRET_LENGTH)
    return sorted(found, key=lambda text: (-len(text), text))


def _spec_secret_values(schema: Any, value: Any) -> Iterator[Any]:
    if not isinstance(schema, Mapping):
        return
    if schema.get("airbyte_secret") is True:
        yield value
        return
    for combinator in _COMBINATORS:
        for alternative in schema.get(combinator) or ():
            yield from _spec_secret_values(alternative, value)
    if isinstance(value, Mapping):
        properties = schema.get("properties") or {}
        for key, item in value.items():
            yield from _spec_secret_values(properties.get(key, schema.get("additionalProperties")), item)
    elif isinstance(value, list):
        for item in value:
            yield from _spec_secret_values(schema.get("items"), item)


def _named_secret_values(node: Any, under_secret_name: bool = False) -> Iterator[str]:
    """Strings under a secret name anywhere in the config; an object's members are judged by their own names."""
    if isinstance(node, str):
        if under_secret_name:
            yield node
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield from _named_secret_values(value, is_secret_name(str(key)))
    elif isinstance(node, list):
        for item in node:
            yield from _named_secret_values(item, under_secret_name)


def _leaf_texts(values: Iterable[Any]) -> Iterator[str]:
    """Every scalar inside ``values`` as text (a marked object or array is secret throughout)."""
    for value in values:
        if isinstance(value, Mapping):
            yield from _leaf_texts(value.values())
        elif isinstance(value, list):
            yield from _leaf_texts(value)
        elif value is None or isinstance(value, bool) or value == "":
            continue
        else:
            yield str(value)


class SecretFilter:
    """Masks secret values in text with ``****`` and tells whether a text holds one."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.use(secrets)

    def use(self, secrets: Iterable[str]) -> None:
        """Mask ``secrets`` from now on, instead of those given before (the spec's, once known, for the guessed ones)."""
        self._given = {str(secret) for secret in secrets if secret not in (None, "")}
        self._registered_seen: tuple[int, int] = (0, 0)  # (id, length) of airbyte-cdk's list when last looked at
        self._build(self._given)

    def _build(self, given: set[str]) -> None:
        values = sorted(given, key=lambda text: (-len(text), text))
        #: masked wherever they occur (and handed to airbyte-cdk's own substring filter)
        self.secrets: list[str] = [value for value in values if len(value) >= MIN_SECRET_LENGTH]
        #: spec secrets too short to mask anywhere: masked as whole values only
        self.short_secrets: list[str] = [value for value in values if len(value) < MIN_SECRET_LENGTH]
        # Plain substring search, longest first, so a secret that contains another one is masked whole.
        forms = {form for secret in self.secrets for form in _escaped_forms(secret) | _url_forms(secret)}
        self._anywhere: list[str] = sorted(forms, key=lambda form: (-len(form), form))
        self._whole_values = _whole_value_patterns(self.short_secrets)

    def _take_registered(self) -> None:
        """Secrets registered with airbyte-cdk since the last look (``add_to_secrets``, OAuth tokens) join ours."""
        registered = getattr(airbyte_secrets_utils, "__SECRETS_FROM_CONFIG", None) or []
        seen = (id(registered), len(registered))
        if seen == self._registered_seen:
            return
        self._registered_seen = seen
        new = {str(secret) for secret in registered if secret} - self._given
        if new:
            self._given |= new
            self._build(self._given)

    def mask(self, text: str) -> str:
        self._take_registered()
        for form in self._anywhere:
            if form in text:
                text = text.replace(form, MASK)
        for pattern, replacement in self._whole_values:
            text = pattern.sub(replacement, text)
        return text

    def contains_secret(self, text: str) -> bool:
        self._take_registered()
        return any(form in text for form in self._anywhere) or any(pattern.search(text) for pattern, _ in self._whole_values)


def _whole_value_patterns(short_secrets: list[str]) -> list[tuple[Pattern[str], str]]:
    """(pattern, replacement) for short secrets standing as a whole quoted value or URL parameter value."""
    if not short_secrets:
        return []
    quoted = _alternation(form for secret in short_secrets for form in _escaped_forms(secret))
    in_url = _alternation(form for secret in short_secrets for form in _url_forms(secret))
    return [
        (re.compile(f'"(?:{quoted})"'), f'"{MASK}"'),
        (re.compile(f"'(?:{quoted})'"), f"'{MASK}'"),
        (re.compile(f"=(?:{in_url})(?=[&#;\"'\\s]|$)"), f"={MASK}"),
    ]


def _alternation(forms: Iterable[str]) -> str:
    return "|".join(re.escape(form) for form in sorted(set(forms), key=lambda form: (-len(form), form)))


def _escaped_forms(secret: str) -> set[str]:
    return {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1], repr(secret)[1:-1]}


def _url_forms(secret: str) -> set[str]:
    return {secret, quote(secret, safe=""), quote(secret), quote_plus(secret)}


class MaskingLogFilter(logging.Filter):
    """Masks secrets in every log record's message, traceback and stack (a failed request's traceback quotes its URL)."""

    def __init__(self, secrets: SecretFilter) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = self.secrets.mask(message)
        if masked != message:
            record.msg, record.args = masked, ()
        if record.exc_info and not record.exc_text:
            # Formatted here and kept as text, so the handler's formatter prints this masked text.
            record.exc_text = _TRACEBACKS.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.secrets.mask(record.exc_text)
        if record.stack_info:
            record.stack_info = self.secrets.mask(record.stack_info)
        return True


_TRACEBACKS = logging.Formatter()
