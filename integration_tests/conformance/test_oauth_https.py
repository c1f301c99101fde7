"""The OAuth 2.0 style over https (``connectors/oauth2_https.py``): no secret is ever printed.

``test_cdk_conformance.py`` compares its records and states with airbyte-cdk's like every
style's. Here: the client secret, the refresh token and every access token the API handed out
appear nowhere in what a process of ours prints, stdout (STATE, LOG, TRACE lines) or stderr
(its log and its errors), in a sync, in a sync with ``--debug``, and when the API refuses the
access token or the refresh token with an error that quotes it (``harness.OAuthShopApi``).
airbyte-cdk masks the access token the authenticator obtained (it adds it to its secrets); so
must we. Each run is a process of its own: airbyte-cdk keeps the secrets it masks in a global
list, which a run in this process would inherit from the runs before it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import conformance_harness as harness
import pytest
import requests

STYLE = "oauth2_https"


def _api(**knobs: Any) -> harness.OAuthShopApi:
    return harness.OAuthShopApi(records=harness.RECORDS, api_key=harness.API_KEY, seed=harness.SEED, stores=harness.STORES,
                                **knobs).start()


@dataclass(repr=False)
class Printed:
    """What a process printed; its repr (in pytest's explanation of a failed assertion) shows no output."""

    returncode: int
    stdout: str
    stderr: str

    def __repr__(self) -> str:
        return f"<process that exited {self.returncode}>"


def _run(api: harness.OAuthShopApi, entrypoint: str, work: Any, *flags: str) -> Printed:
    """``run_connector.py oauth2_https ENTRYPOINT read`` as a process, trusting the API's certificate."""
    config = {**harness.source_config(api), "destination": {"type": "spark", "warehouse": str(work / "warehouse"),
                                                            "spark_master": "local[1]"}}
    with harness.trusting(api):
        catalog = harness.configured_catalog(STYLE, config)
    config_path, catalog_path = work / "config.json", work / "catalog.json"
    config_path.write_text(json.dumps(config))
    catalog_path.write_text(json.dumps(catalog))
    command = [sys.executable, harness.RUN_CONNECTOR, STYLE, entrypoint, "read", "--config", str(config_path),
               "--catalog", str(catalog_path), *flags]
    done = subprocess.run(command, capture_output=True, text=True, cwd=harness.HERE, timeout=600,
                          env={**os.environ, **harness.client_env(api)})
    return Printed(done.returncode, done.stdout, done.stderr)


def _names(api: harness.OAuthShopApi) -> dict[str, str]:
    names = {api.client_secret: "<client secret>", api.refresh_token: "<refresh token>"}
    names.update({token: f"<access token {n + 1}>" for n, token in enumerate(api.access_tokens)})
    return names


def _named(api: harness.OAuthShopApi, text: str) -> str:
    """``text`` with each secret replaced by its name: this test's own output must not print them either."""
    for secret, name in _names(api).items():
        text = text.replace(secret, name)
    return text


def _secrets_printed(api: harness.OAuthShopApi, process: Printed) -> list[str]:
    """Each line of the process's stdout and stderr that holds a secret (named, see ``_named``)."""
    found = []
    for where, text in (("stdout", process.stdout), ("stderr", process.stderr)):
        for line in text.splitlines():
            if any(secret in line for secret in _names(api)):
                found.append(f"{where}: {_named(api, line)[:600]}")
    return found


def _messages(process: Printed) -> list[dict[str, Any]]:
    return [json.loads(line) for line in process.stdout.splitlines() if line.startswith("{")]


def _trace_errors(process: Printed) -> list[tuple[str | None, str]]:
    """(stream, failure type) of each TRACE error the process printed."""
    return [((m["trace"]["error"].get("stream_descriptor") or {}).get("name"), m["trace"]["error"].get("failure_type"))
            for m in _messages(process) if m.get("type") == "TRACE" and m["trace"].get("type") == "ERROR"]


def test_the_api_speaks_only_https_with_a_certificate_trusted_through_requests_ca_bundle():
    """What the style's runs rely on: a client that does not trust the test's certificate cannot
    reach the API, and a data request needs an access token from the token endpoint."""
    api = _api()
    try:
        assert api.url.startswith("https://127.0.0.1:")
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(f"{api.url}/stores", verify=requests.certs.where(), timeout=10)
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(f"http://127.0.0.1:{api.port}/stores", timeout=10)
        bundle = harness.client_env(api)["REQUESTS_CA_BUNDLE"]
        assert requests.get(f"{api.url}/stores", verify=bundle, timeout=10).status_code == 401
        form = {"grant_type": "refresh_token", **{k: v for k, v in api.credentials().items() if k != "auth_type"}}
        token = requests.post(f"{api.url}/oauth/token", data=form, verify=bundle, timeout=10).json()["access_token"]
        answer = requests.get(f"{api.url}/stores", headers={"Authorization": f"Bearer {token}"}, verify=bundle, timeout=10)
        assert answer.status_code == 200 and len(answer.json()["data"]) == harness.STORES
    finally:
        api.stop()


@pytest.mark.parametrize(
    "flags",
    [
        pytest.param(("--destination", "stdout", "--debug"), id="stdout-debug"),
        pytest.param((), id="spark", marks=pytest.mark.slow),  # a JVM of its own
    ],
)
def test_a_sync_prints_no_secret(tmp_path, flags):
    api = _api()
    try:
        ours = _run(api, "ours", tmp_path, *flags)
    finally:
        api.stop()
    assert ours.returncode == 0, _named(api, ours.stderr[-4000:])
    assert api.access_tokens, "the connector never asked the token endpoint for an access token"
    read: dict[str, float] = {}  # every record of the API, through the authenticator, over https
    for message in _messages(ours):
        if message.get("type") == "STATE":
            name = message["state"]["stream"]["stream_descriptor"]["name"]
            read[name] = read.get(name, 0) + message["state"]["sourceStats"]["recordCount"]
    assert read == {"users": harness.RECORDS, "stores": harness.STORES}, read
    printed = _secrets_printed(api, ours)
    assert not printed, "secrets printed by ours:\n" + "\n".join(printed)


def test_airbyte_cdk_masks_the_access_token_an_api_error_quotes(tmp_path):
    """The reference: the API revokes the access token half-way; its 401 answer quotes the token.
    airbyte-cdk fails both streams with a config error and prints the token as ``****``."""
    api = _api(revoke_after=3)
    try:
        cdk = _run(api, "cdk", tmp_path)
    finally:
        api.stop()
    assert cdk.returncode != 0 and ("users", "config_error") in _trace_errors(cdk), _named(api, cdk.stdout[-4000:])
    assert "access token '****' is invalid" in cdk.stdout  # the quoted token, masked
    printed = _secrets_printed(api, cdk)
    assert not printed, "secrets printed by airbyte-cdk:\n" + "\n".join(printed)


def test_ours_masks_the_access_token_an_api_error_quotes(tmp_path):
    api = _api(revoke_after=3)
    try:
        ours = _run(api, "ours", tmp_path, "--destination", "stdout")
    finally:
        api.stop()
    assert ours.returncode != 0, _named(api, ours.stderr[-4000:])
    errors = _trace_errors(ours)
    assert ("users", "config_error") in errors and ("stores", "config_error") in errors, _named(api, ours.stdout[-4000:])
    printed = _secrets_printed(api, ours)
    assert not printed, "secrets printed by ours:\n" + "\n".join(printed)


@pytest.mark.parametrize("entrypoint", ["cdk", "ours"])
def test_a_refused_refresh_token_is_not_printed(tmp_path, entrypoint):
    """The token endpoint refuses the refresh token (revoked) and quotes it in its answer: the
    streams fail, and neither the refresh token nor the client secret is printed."""
    api = _api()
    api.refresh_revoked = True
    try:
        run = _run(api, entrypoint, tmp_path, *(["--destination", "stdout"] if entrypoint == "ours" else []))
    finally:
        api.stop()
    assert run.returncode != 0 and {stream for stream, _ in _trace_errors(run)} >= {"users", "stores"}, _named(api, run.stdout[-4000:])
    assert not api.access_tokens
    printed = _secrets_printed(api, run)
    assert not printed, f"secrets printed by {entrypoint}:\n" + "\n".join(printed)
