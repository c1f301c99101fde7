"""Keeping config secrets out of states, logs and errors.

Which config values are secrets (``find_secrets``):

- every value of a field the spec marks ``airbyte_secret`` (inside objects, arrays and
  ``oneOf``/``anyOf``/``allOf`` alternatives), whatever its type or length: the connector's
  author said so;
- a string of at least ``MIN_SECRET_LENGTH`` characters under a name that clearly is a secret,
  for a spec that forgot a mark. A name is a secret when its last word is a secret noun
  (``password``, ``passphrase``, ``secret``, ``token``, ``apikey``, ``credentials``) or its last
  two words name a kind of key (``api_key``, ``private_key``, ``secret_access_key``):
  ``client_secret``, ``accessToken`` and ``X-API-KEY`` are secrets; ``token_ttl_minutes``,
  ``max_tokens``, ``secret_rotation_days``, ``token_url`` and ``access_key_id`` are not. The
  rule is strict on purpose: a false match is not harmless, it refuses every state that happens
  to hold the same text (``"token_ttl_minutes": 5`` failed any state with a 5 in it, and turned
  "500 records" into "****00 records" in the logs).

How a secret is masked (``SecretFilter``):

- a secret of ``MIN_SECRET_LENGTH`` (8) characters or more is masked wherever it occurs, in
  every form text carries it in: as is, JSON-escaped, escaped as Python's ``repr`` does
  (jsonschema's errors quote the config that way) and URL-encoded (an HTTP error names its URL).
  Eight characters is the shortest password common policies accept (NIST SP 800-63B); a value
  that long turns up in unrelated text only by coincidence nobody needs to plan for.
- a shorter spec secret (a one-letter test key, a 4-digit PIN) is masked only where it stands as
  a whole value: a complete quoted string (``"k"`` as JSON prints it, ``'k'`` as ``repr`` and
  jsonschema do) or a whole URL parameter value (``?key=k&``). Masking it anywhere would garble
  unrelated words and numbers ("chec****point", "****00 records") and would refuse states that
  merely contain its letters. Known limit: a short secret printed bare, not quoted (jsonschema's
  ``1234 is not of type 'string'``), stays readable; a secret worth the name is longer.
- ``contains_secret`` is true exactly when ``mask`` would change the text, so a state is refused
  (``runtime.state_checks``, ``runtime.read_command``) on the same matches a log line is masked on: a state
  holding a short secret as a whole string value is refused, one holding ``"cab"`` when the
  secret is ``ab`` is not.

``SecretFilter.secrets`` lists the long secrets only: those are what airbyte-cdk's own filter
(``update_secrets``), which replaces substrings anywhere, is given. Secrets a connector registers
with airbyte-cdk while it runs (``add_to_secrets``: an OAuth access token ``Oauth2Authenticator``
obtained) are masked too, as airbyte-cdk masks them: each mask looks for new ones there first.
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
#: Words of a name in any case style: snake_case, kebab-case, camelCase, UPPER_CASE, APIKey.
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_COMBINATORS = ("oneOf", "anyOf", "allOf")


def is_secret_name(name: str) -> bool:
    """A config key that clearly holds a secret (see the module docstring)."""
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
    """The parts of ``value`` that ``schema`` marks ``airbyte_secret``, walking both together."""
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
    """Strings under a secret name (directly or in a list), anywhere in the config. The members
    of an object are judged by their own names: ``credentials.auth_type`` is not a secret."""
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
        self._given = {str(secret) for secret in secrets if secret not in (None, "")}
        self._registered_seen: tuple[int, int] = (0, 0)  # (id, length) of airbyte-cdk's list when last looked at
        self._build(self._given)

    def _build(self, given: set[str]) -> None:
        values = sorted(given, key=lambda text: (-len(text), text))
        #: masked wherever they occur (and handed to airbyte-cdk's own substring filter)
        self.secrets: list[str] = [value for value in values if len(value) >= MIN_SECRET_LENGTH]
        #: spec secrets too short to mask anywhere: masked as whole values only
        self.short_secrets: list[str] = [value for value in values if len(value) < MIN_SECRET_LENGTH]
        # Plain substring search for the long ones: a state of 10 MB is checked in milliseconds.
        # Longest first, so a secret that contains another one is masked whole.
        forms = {form for secret in self.secrets for form in _escaped_forms(secret) | _url_forms(secret)}
        self._anywhere: list[str] = sorted(forms, key=lambda form: (-len(form), form))
        self._whole_values = _whole_value_patterns(self.short_secrets)

    def _take_registered(self) -> None:
        """Secrets registered with airbyte-cdk since the last look (``add_to_secrets``) join ours."""
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
    """(pattern, replacement) for short secrets standing as a whole value: a complete string in
    double or single quotes, or a whole URL parameter value. Each pattern starts with its quote
    or ``=``, which keeps the search fast; the replacement puts that character back."""
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
    """The secret as it appears inside a quoted string: as is, in JSON (ASCII or UTF-8) and in a repr."""
    return {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1], repr(secret)[1:-1]}


def _url_forms(secret: str) -> set[str]:
    """The secret as it appears in a URL: as is, percent-encoded (path or component) and form-encoded."""
    return {secret, quote(secret, safe=""), quote(secret), quote_plus(secret)}


class MaskingLogFilter(logging.Filter):
    """A logging filter that masks secrets in every record's final message, and in the traceback
    and stack it carries (airbyte-cdk logs a failed request with its traceback, whose text quotes
    the request's URL)."""

    def __init__(self, secrets: SecretFilter) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = self.secrets.mask(message)
        if masked != message:
            record.msg, record.args = masked, ()
        if record.exc_info and not record.exc_text:
            # formatted here, as the handler's formatter would, and kept as text: the formatter
            # then prints this text instead of formatting the exception again
            record.exc_text = _TRACEBACKS.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.secrets.mask(record.exc_text)
        if record.stack_info:
            record.stack_info = self.secrets.mask(record.stack_info)
        return True


_TRACEBACKS = logging.Formatter()
