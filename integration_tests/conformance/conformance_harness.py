"""Run a conformance connector under airbyte-cdk's entrypoint and under ours, and compare.

- ``cdk_read``: airbyte-cdk's own ``read`` path in this process
  (``airbyte_cdk.test.entrypoint_wrapper.read``), records printed as RECORD messages;
- ``ours_read``: source_framework's ``read`` in this process (``source_framework.testing.read``),
  records landed in Spark tables (or printed, with ``--destination stdout``);
- ``OAuthShopApi``: the demo API over https (a certificate made for 127.0.0.1 by the test) behind
  an OAuth 2.0 token endpoint, for the styles of ``OAUTH_STYLES``, whose runs trust it through
  ``client_env`` / ``trusting``;
- ``KilledRun``: ours as a real process (``run_connector.py``) reading from an API that holds
  the second half of its requests (``ShopApi``), paused at a fault point and killed with SIGKILL,
  keeping the last STATE of each stream it printed; ``KillRunner`` runs them in the background;
- ``read_tables`` / ``check_tables_equal_records`` (from ``source_framework.testing``): the
  tables read back with the test session's ``spark`` and compared with records by value
  through the stream's JSON schema.

Every run here sees the demo API with the same knobs, so two APIs started with them serve the
same data (``start_api``); ``touch`` updates some records between two syncs.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import hmac
import importlib
import ipaddress
import json
import logging
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

from airbyte_cdk.models import (
    AirbyteMessageSerializer,
    AirbyteStateMessageSerializer,
    ConfiguredAirbyteCatalogSerializer,
)
from airbyte_cdk.models.airbyte_protocol_serializers import AirbyteStreamSerializer
from airbyte_cdk.test.entrypoint_wrapper import read as entrypoint_read

from source_framework.demo.api import DemoApi
from source_framework.demo.api.server import _Server
from source_framework.testing import table_checks
from source_framework.testing.catalogs import StreamInfo, stream_infos
from source_framework.testing.table_checks import check_tables_equal_records  # noqa: F401 (for the tests)

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_CONNECTOR = os.path.join(HERE, "run_connector.py")

API_KEY = "conformance-key-7d1f"
START_DATE = "2025-01-01T00:00:00Z"
RECORDS, STORES, SEED = 240, 4, 17
TOUCHES = {"users": 10, "orders": 10, "products": 5}
#: what the LOG messages the connectors yield themselves start with
LOG_PREFIX = "conformance:"
#: the --concurrency values the differential checks run ours with (issue 13: the same tables)
CONCURRENCIES = (1, 4)
#: styles whose API is served over https behind an OAuth 2.0 token endpoint (``OAuthShopApi``)
OAUTH_STYLES = frozenset({"oauth2_https"})

# --- the API and the inputs --------------------------------------------------------------------


class ShopApi(DemoApi):
    """The demo API with a gate: when ``hold_after`` is set, every data request after that many
    waits until ``open_gate(drip)``, and is then answered ``drip`` seconds late. A connector read
    from it stops half-way until its runtime has committed something, then goes on slowly: it is
    still in the middle of its sync when its runtime prints its first STATEs."""

    def __init__(self, *args: Any, hold_after: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hold_after = hold_after
        self._opened = threading.Event()
        self._drip = 0.0
        self._served = 0
        self._served_lock = threading.Lock()
        #: requests held at the gate right now
        self.waiting = 0

    def respond(self, method: str, target: str, headers: Any, body: bytes) -> Any:
        if self.hold_after is not None and not target.startswith("/_admin/"):
            with self._served_lock:
                self._served += 1
                gated = self._served > self.hold_after
                self.waiting += gated
            if gated:
                self._opened.wait(600)
                with self._served_lock:
                    self.waiting -= 1
                if self.hold_after is not None:
                    time.sleep(self._drip)
        return super().respond(method, target, headers, body)

    def open_gate(self, drip: float) -> None:
        self._drip = drip
        self._opened.set()

    def full_speed(self) -> None:
        self.hold_after = None
        self._opened.set()

    def stop(self) -> None:
        self.full_speed()
        super().stop()


class OAuthShopApi(ShopApi):
    """``ShopApi`` over https, its data behind OAuth 2.0, as a SaaS API with a token endpoint.

    ``POST /oauth/token`` (a form: ``grant_type=refresh_token``, the client's id and secret, the
    refresh token) answers a new access token that expires in ``expires_in`` seconds; a data
    request must carry one as ``Authorization: Bearer``, and is then answered as ``ShopApi``
    answers it. Both error answers quote what they were given (an unknown or revoked access
    token, a revoked refresh token), as some APIs do: what a client prints of such an answer must
    mask it. The certificate is ``tls_certificate()``'s, for 127.0.0.1; a client trusts it through
    ``client_env``. The secrets are new for every API; ``access_tokens`` lists every access token
    it handed out."""

    client_id = "conformance-oauth-client"
    expires_in = 3600

    def __init__(self, *args: Any, revoke_after: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: after this many data requests, every access token handed out until then is refused
        self.revoke_after = revoke_after
        #: the token endpoint refuses the refresh token (a user revoked the app's grant)
        self.refresh_revoked = False
        self.client_secret = "cs-" + secrets.token_urlsafe(24)
        self.refresh_token = "rt-" + secrets.token_urlsafe(24)
        self.access_tokens: list[str] = []
        self._valid_tokens: set[str] = set()
        self._data_requests = 0
        self._tokens_lock = threading.Lock()

    def start(self) -> OAuthShopApi:
        # DemoApi.start with a server that speaks TLS on every connection it accepts.
        if self._server is None:
            server = self._server = _TlsServer((self.host, self._requested_port), self, tls_context())
            self._thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.1}, name=f"oauth-api-{self.port}", daemon=True
            )
            self._thread.start()
        return self

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def credentials(self) -> dict[str, str]:
        """The config's ``credentials`` object (``connectors/oauth2_https.py``'s spec)."""
        return {"auth_type": "oauth2.0", "client_id": self.client_id, "client_secret": self.client_secret,
                "refresh_token": self.refresh_token}

    def respond(self, method: str, target: str, headers: Any, body: bytes) -> Any:
        if urlsplit(target).path.rstrip("/") == "/oauth/token":
            return self._token(method, body)
        if not target.startswith("/_admin/"):
            given = headers.get("Authorization", "")
            token = given.removeprefix("Bearer ")
            with self._tokens_lock:
                self._data_requests += 1
                if self.revoke_after is not None and self._data_requests == self.revoke_after + 1:
                    self._valid_tokens.clear()
                valid = given.startswith("Bearer ") and token in self._valid_tokens
            if not valid:
                return 401, {"error": f"access token '{token}' is invalid or was revoked"}, {}
            headers = {"Authorization": f"Bearer {API_KEY}"}  # the demo API's own key, behind this gateway
        return super().respond(method, target, headers, body)

    def _token(self, method: str, body: bytes) -> Any:
        if method != "POST":
            return 405, {"error": "POST only"}, {"Allow": "POST"}
        form = {name: values[0] for name, values in parse_qs(body.decode(errors="replace")).items()}
        client_ok = form.get("client_id") == self.client_id and hmac.compare_digest(
            form.get("client_secret", "").encode(), self.client_secret.encode()
        )
        if form.get("grant_type") != "refresh_token" or not client_ok:
            return 401, {"error": "invalid_client"}, {}
        given = form.get("refresh_token", "")
        if self.refresh_revoked or not hmac.compare_digest(given.encode(), self.refresh_token.encode()):
            return 400, {"error": "invalid_grant", "error_description": f"refresh token '{given}' was revoked"}, {}
        token = "at-" + secrets.token_urlsafe(24)
        with self._tokens_lock:
            self.access_tokens.append(token)
            self._valid_tokens.add(token)
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": self.expires_in}, {}


class _TlsServer(_Server):
    """The demo API's server, each accepted connection wrapped in TLS; the handshake is made in
    the connection's own thread, so a slow client holds up no other."""

    def __init__(self, address: tuple[str, int], api: DemoApi, context: ssl.SSLContext) -> None:
        self._tls = context
        super().__init__(address, api)

    def get_request(self) -> tuple[Any, Any]:
        connection, address = super().get_request()
        return self._tls.wrap_socket(connection, server_side=True, do_handshake_on_connect=False), address

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            request.do_handshake()
        except (ssl.SSLError, OSError):
            return  # a client that does not trust the certificate hangs up here
        super().finish_request(request, client_address)


_tls_files: tuple[str, str] | None = None
_tls_lock = threading.Lock()


def tls_certificate() -> tuple[str, str]:
    """(certificate, key) PEM files of a self-signed certificate for 127.0.0.1, made once per
    process (with ``cryptography``, which airbyte-cdk depends on) in a folder removed at exit."""
    global _tls_files
    with _tls_lock:
        if _tls_files is None:
            from cryptography import x509
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import ec
            from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

            key = ec.generate_private_key(ec.SECP256R1())
            name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
            now = datetime.now(UTC)
            certificate = (
                x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=2))
                .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256())
            )
            folder = tempfile.mkdtemp(prefix="conformance-tls-")
            atexit.register(shutil.rmtree, folder, True)
            cert_path, key_path = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
            with open(cert_path, "wb") as handle:
                handle.write(certificate.public_bytes(serialization.Encoding.PEM))
            with open(key_path, "wb") as handle:
                handle.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
            _tls_files = cert_path, key_path
        return _tls_files


def tls_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*tls_certificate())
    return context


def client_env(api: DemoApi) -> dict[str, str]:
    """What a client's environment needs to reach ``api``: for the https one, the trust of its
    certificate through ``REQUESTS_CA_BUNDLE`` (requests reads it for every request, the
    authenticator's token request included)."""
    return {"REQUESTS_CA_BUNDLE": tls_certificate()[0]} if isinstance(api, OAuthShopApi) else {}


@contextlib.contextmanager
def trusting(api: DemoApi) -> Iterator[None]:
    """``client_env(api)`` in this process's environment, for the runs in this process."""
    before = {name: os.environ.get(name) for name in client_env(api)}
    os.environ.update(client_env(api))
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def start_api(hold_after: int | None = None, style: str | None = None) -> ShopApi:
    """A fresh demo API (``style``'s kind: over https behind OAuth for ``OAUTH_STYLES``); every
    one started here serves the same data until ``touch``."""
    kind = OAuthShopApi if style in OAUTH_STYLES else ShopApi
    return kind(records=RECORDS, api_key=API_KEY, seed=SEED, stores=STORES, hold_after=hold_after).start()


def touch(api: DemoApi) -> None:
    """Update some users, orders (so store orders too) and products between two syncs."""
    for stream, count in TOUCHES.items():
        api.touch(stream, count)


def source_config(api: DemoApi) -> dict[str, Any]:
    if isinstance(api, OAuthShopApi):
        return {"api_url": api.url, "start_date": START_DATE, "credentials": api.credentials()}
    return {"api_url": api.url, "api_key": API_KEY, "start_date": START_DATE}


def ours_config(api: DemoApi, warehouse: str, concurrency: int | None = None) -> dict[str, Any]:
    """The source's config plus our destination; ``concurrency``: the config's ``concurrency_level``
    (what ``--concurrency`` sets, for a process whose command line is airbyte-cdk's)."""
    config = {**source_config(api), "destination": {"type": "spark", "warehouse": str(warehouse), "spark_master": "local[1]"}}
    return config if concurrency is None else {**config, "concurrency_level": concurrency}


def connector(style: str) -> Any:
    return importlib.import_module(f"connectors.{style}")


def build_source(style: str, config: Mapping[str, Any], catalog: Mapping[str, Any], state: list[dict] | None) -> Any:
    """The source as the style's ``run.py`` builds it from the command line's files."""
    return connector(style).build_source(
        dict(config),
        ConfiguredAirbyteCatalogSerializer.load(catalog),
        [AirbyteStateMessageSerializer.load(s) for s in state] if state is not None else None,
    )


def configured_catalog(style: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """Every stream the source discovers: incremental + append where it supports it, else
    full refresh + overwrite; default cursor and primary key."""
    source = build_source(style, config, {"streams": []}, None)
    streams = []
    for stream in source.discover(logging.getLogger("conformance"), dict(config)).streams:
        incremental = "incremental" in [mode.value for mode in stream.supported_sync_modes]
        streams.append(
            {
                "stream": AirbyteStreamSerializer.dump(stream),
                "sync_mode": "incremental" if incremental else "full_refresh",
                "destination_sync_mode": "append" if incremental else "overwrite",
                "cursor_field": (stream.default_cursor_field or []) if incremental else [],
                "primary_key": stream.source_defined_primary_key or [],
            }
        )
    return {"streams": streams}


def infos(catalog: Mapping[str, Any]) -> dict[str, StreamInfo]:
    return stream_infos(catalog)


def read_tables(spark: Any, warehouse: str, style: str, catalog: Mapping[str, Any]) -> dict[str, Any]:
    """Our tables of ``style``'s streams in ``warehouse``, read back with ``spark`` (None where a
    stream has no committed table). The tables of a stream without a namespace are in the folder
    of the source's name, as our ``read`` lays them out."""
    from source_framework.destinations.spark.destination import SparkDestination

    destination = SparkDestination(warehouse, default_namespace=connector(style).build_source(None, None, None).name)
    return table_checks.read_tables(spark, destination, infos(catalog))


def landed_tables(spark: Any, warehouse: str, style: str, catalog: Mapping[str, Any]) -> dict[str, Any]:
    """``read_tables``, but a Delta table read through its log by delta-rs (``landed``)."""
    from source_framework.destinations.spark.destination import SparkDestination

    destination = SparkDestination(warehouse, default_namespace=connector(style).build_source(None, None, None).name)
    return landed(spark, destination, infos(catalog))


def landed(spark: Any, destination: Any, streams: Mapping[str, StreamInfo]) -> dict[str, Any]:
    """``table_checks.read_tables``, but a Delta table read through its log by delta-rs (another Delta reader) instead of
    Spark, for the tests about which records landed: each style's tables are read with Spark by its first tests, and
    Spark replays a small table's log in several jobs per read."""
    from deltalake import DeltaTable

    from source_framework.destinations.spark.delta_table import is_delta_table

    tables: dict[str, Any] = {}
    for name, stream in streams.items():
        table = destination.committed_table(stream.namespace, stream.name, spark)
        if not is_delta_table(table.path):
            tables.update(table_checks.read_tables(spark, destination, {name: stream}))
        elif table.last_checkpoint() is None:
            tables[name] = None
        else:
            arrow = DeltaTable(table.path).to_pyarrow_table()
            tables[name] = table_checks.table_rows(table.path, arrow.column_names, arrow.to_pylist(), stream)
    return tables


def incremental_streams(catalog: Mapping[str, Any]) -> list[str]:
    return [s["stream"]["name"] for s in catalog["streams"] if s["sync_mode"] == "incremental"]


def overwrite_streams(catalog: Mapping[str, Any]) -> list[str]:
    return [s["stream"]["name"] for s in catalog["streams"] if s["destination_sync_mode"] == "overwrite"]


# --- runs --------------------------------------------------------------------------------------


@dataclass
class Run:
    """What one ``read`` printed (protocol messages as dicts) and how it ended."""

    label: str
    messages: list[dict[str, Any]]
    returncode: int = 0
    crash: str | None = None  # traceback of an exception that escaped the entrypoint
    seconds: float = 0.0

    def records(self, stream: str | None = None) -> list[dict[str, Any]]:
        return [
            m["record"]["data"]
            for m in self.messages
            if m.get("type") == "RECORD" and (stream is None or m["record"]["stream"] == stream)
        ]

    def states(self) -> list[dict[str, Any]]:
        return [m["state"] for m in self.messages if m.get("type") == "STATE"]

    def final_state_list(self) -> list[dict[str, Any]]:
        """The last STATE of each stream, as ``--state`` takes them (without ``sourceStats``)."""
        return self.states_at(len(self.states()))

    def final_states(self) -> dict[str, dict[str, Any]]:
        """``final_state_list`` by stream name: for streams synced at once, which end in any order."""
        return {state["stream"]["stream_descriptor"]["name"]: state for state in self.final_state_list()}

    def states_at(self, position: int) -> list[dict[str, Any]]:
        """The last STATE of each stream among the first ``position`` STATEs: what an orchestrator
        holds if the run dies right after its ``position``-th STATE."""
        latest: dict[str, dict[str, Any]] = {}
        for state in self.states()[:position]:
            latest[state["stream"]["stream_descriptor"]["name"]] = {"type": state.get("type", "STREAM"), "stream": state["stream"]}
        return list(latest.values())

    def errors(self) -> list[str]:
        found = [
            f"{m['trace']['error'].get('failure_type')}: {m['trace']['error'].get('message')}\n"
            f"{m['trace']['error'].get('stack_trace') or ''}"
            for m in self.messages
            if m.get("type") == "TRACE" and m["trace"].get("type") == "ERROR"
        ]
        return found + ([self.crash] if self.crash else [])

    def logs(self, prefix: str = LOG_PREFIX) -> Counter:
        """The LOG messages whose text starts with ``prefix``: those the connectors emit themselves."""
        return Counter(
            m["log"]["message"] for m in self.messages if m.get("type") == "LOG" and m["log"]["message"].startswith(prefix)
        )

    def estimates(self) -> Counter:
        return Counter(
            (m["trace"]["estimate"]["name"], m["trace"]["estimate"]["type"], m["trace"]["estimate"].get("row_estimate"))
            for m in self.messages
            if m.get("type") == "TRACE" and m["trace"].get("type") == "ESTIMATE"
        )

    def ok(self) -> bool:
        return self.returncode == 0 and not self.errors()

    def describe(self) -> str:
        counts = Counter(m.get("type", "?") for m in self.messages)
        per_stream = Counter(m["record"]["stream"] for m in self.messages if m.get("type") == "RECORD")
        text = f"{self.label}: exit {self.returncode}, {dict(counts)}, records {dict(per_stream)}, {self.seconds:.1f}s"
        errors = self.errors()
        return text + ("\n  errors:\n  " + "\n  ".join(e.strip()[:4000] for e in errors) if errors else "")


def cdk_read(style: str, config: Mapping[str, Any], catalog: Mapping[str, Any], state: list[dict] | None = None) -> Run:
    """airbyte-cdk's ``read`` (its ``AirbyteEntrypoint``, in this process)."""
    started = time.monotonic()
    source = build_source(style, config, catalog, state)
    output = entrypoint_read(
        source,
        dict(config),
        ConfiguredAirbyteCatalogSerializer.load(catalog),
        [AirbyteStateMessageSerializer.load(s) for s in state] if state is not None else None,
    )
    messages = [AirbyteMessageSerializer.dump(m) for m in output.get_message_iterator()]
    return Run(f"airbyte-cdk read ({style})", _json_roundtrip(messages), seconds=time.monotonic() - started)


def ours_read(
    style: str,
    config: Mapping[str, Any],
    catalog: Mapping[str, Any],
    state: list[dict] | None = None,
    args: Sequence[str] = (),
) -> Run:
    """source_framework's ``read`` in this process (Spark tables unless ``args`` say stdout)."""
    from source_framework.testing import read

    started = time.monotonic()
    label = f"source_framework read ({style}{', ' + ' '.join(args) if args else ''})"
    try:
        output = read(build_source(style, config, catalog, state), config, catalog, state=state, args=list(args))
    except Exception:  # noqa: BLE001 - whatever escaped is the finding; keep it for the assertion message
        return Run(label, [], returncode=-1, crash=traceback.format_exc(), seconds=time.monotonic() - started)
    return Run(label, output.messages, returncode=output.returncode, seconds=time.monotonic() - started)


def _json_roundtrip(messages: list[Any]) -> list[dict[str, Any]]:
    """Plain JSON values, as ours' messages are (the CDK's were printed and parsed back already)."""
    return [json.loads(json.dumps(m)) for m in messages]


def stream_ends(run: Any) -> list[tuple[str, str]]:
    """Each stream's COMPLETE or INCOMPLETE status, in order, from a run's protocol messages (dicts)."""
    return [(m["trace"]["stream_status"]["stream_descriptor"]["name"], m["trace"]["stream_status"]["status"])
            for m in run.messages if m.get("type") == "TRACE" and m["trace"].get("type") == "STREAM_STATUS"
            and m["trace"]["stream_status"]["status"] in ("COMPLETE", "INCOMPLETE")]


# --- comparing records ------------------------------------------------------------------------


def canonical(record: Mapping[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def record_multisets(run: Run, catalog: Mapping[str, Any], streams: Sequence[str] | None = None) -> dict[str, Counter]:
    names = streams if streams is not None else list(infos(catalog))
    return {name: Counter(canonical(r) for r in run.records(name)) for name in names}


def multiset_diff(expected: dict[str, Counter], actual: dict[str, Counter]) -> list[str]:
    problems = []
    for name in expected:
        want, got = expected[name], actual.get(name, Counter())
        if want != got:
            missing, extra = want - got, got - want
            problems.append(
                f"stream '{name}': {sum(got.values())} records, expected {sum(want.values())}; "
                f"{sum(missing.values())} missing (e.g. {list(missing)[:2]}), {sum(extra.values())} extra (e.g. {list(extra)[:2]})"
            )
    return problems


@dataclass
class Reference:
    """Stands for a read whose records a table must hold (``check_tables_equal_records`` takes it)."""

    by_stream: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def records(self, stream: str) -> list[dict[str, Any]]:
        return self.by_stream.get(stream, [])


def after_resume(first: Run, resumed: Run, catalog: Mapping[str, Any], replaced_by: Run | None = None) -> Reference:
    """What a table holds after a sync and a resumed sync into it: append streams every distinct
    record of both exactly once; overwrite streams the resumed sync's records (or ``replaced_by``'s:
    a complete read, where the resumed sync is airbyte-cdk's from a final state, from which it reads
    no full refresh again, while ours reads each in full)."""
    reference = Reference()
    replaced = set(overwrite_streams(catalog))
    for name in infos(catalog):
        if name in replaced:
            reference.by_stream[name] = (replaced_by or resumed).records(name)
            continue
        seen: dict[str, dict[str, Any]] = {}
        for record in first.records(name) + resumed.records(name):
            seen.setdefault(canonical(record), record)
        reference.by_stream[name] = list(seen.values())
    return reference


def from_state(incremental: Run, everything: Run, catalog: Mapping[str, Any]) -> Reference:
    """What a fresh table holds after ours read from a given state: the incremental streams what
    ``incremental`` (airbyte-cdk from that state) read; the full-refresh (overwrite) streams every
    record, as ``everything`` (a complete read) has them. A full refresh replaces its table with
    all records whatever state it is given (a page token of airbyte-cdk's resumable full refresh,
    or its completion marker): under airbyte-cdk the destination keeps the pages an earlier
    attempt read, here the table is never half a snapshot."""
    replaced = set(overwrite_streams(catalog))
    return Reference({name: (everything if name in replaced else incremental).records(name) for name in infos(catalog)})


# --- a killed process of ours --------------------------------------------------------------------


@dataclass
class KilledRun:
    """``run_connector.py STYLE ours read ...`` killed with SIGKILL in the middle of its sync.

    The API holds the connector's requests after the first half (``ShopApi``) until the process
    has committed a first checkpoint (an entry of a table's ``_delta_log/``, or a file under
    ``_spark_metadata/`` or ``_checkpoints/`` of a ``parquet`` table), or ``open_after`` seconds,
    then answers them one every ``drip`` seconds. With
    ``SOURCE_FRAMEWORK_PAUSE_AT=state.printed:1`` the process pauses right after printing its
    first STATE (other threads, such as background commits, go on) and is killed there with
    SIGKILL, together with whatever it started (pool workers, the Spark JVM); one that has printed
    no STATE ``kill_after`` seconds after it started is killed where it is. The last STATE of each
    stream it printed is kept, as an orchestrator would keep it.

    ``kill_when_held``: for a sync of ours that prints a single STATE, at its very end (a stream
    whose state lags its records checkpoints only when it completes), a kill after a STATE would
    come after the end. Such a process is killed as soon as the API holds one of its requests:
    in the middle of its sync, with the first half read and no STATE printed.
    """

    style: str
    config_path: str
    catalog_path: str
    api: ShopApi
    warehouse: str
    pause_at: str = "state.printed:1"
    open_after: float = 20
    drip: float = 1.0
    kill_after: float = 90
    kill_when_held: bool = False
    #: added to the process's environment (``client_env``: the trust of an https API's certificate)
    env: dict[str, str] = field(default_factory=dict)
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    state_lines: int = 0
    paused: bool = False
    held: bool = False  # killed while the API held a request of it (``kill_when_held``)
    killed: bool = False
    opened_at: str | None = None
    returncode: int | None = None
    stderr: list[str] = field(default_factory=list)
    _process: subprocess.Popen | None = field(default=None, repr=False)

    def run(self) -> KilledRun:
        env = {**os.environ, **self.env, "SOURCE_FRAMEWORK_PAUSE_AT": self.pause_at}
        # Only airbyte-cdk's own flags: a run.py in the style of the published declarative connectors
        # reads its paths with airbyte-cdk's argument parser, which refuses ours (such as --quiet).
        command = [sys.executable, RUN_CONNECTOR, self.style, "ours", "read", "--config", self.config_path,
                   "--catalog", self.catalog_path]
        started = time.monotonic()
        process = self._process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=HERE, start_new_session=True
        )
        paused = threading.Event()

        def read_stdout() -> None:
            for line in process.stdout:
                if not line.strip():
                    continue
                message = json.loads(line)
                if message.get("type") == "STATE":
                    self.state_lines += 1
                    state = message["state"]
                    name = state["stream"]["stream_descriptor"]["name"]
                    self.states[name] = {"type": state.get("type", "STREAM"), "stream": state["stream"]}

        def read_stderr() -> None:
            for line in process.stderr:
                text = line.decode(errors="replace")
                self.stderr.append(text)
                if text.startswith("paused at "):
                    paused.set()

        readers = [threading.Thread(target=read_stdout, daemon=True), threading.Thread(target=read_stderr, daemon=True)]
        for reader in readers:
            reader.start()
        while process.poll() is None and not paused.is_set():
            elapsed = time.monotonic() - started
            if elapsed > self.kill_after:
                break
            if self.kill_when_held:
                if self.api.waiting:
                    self.held = True
                    break
            elif self.opened_at is None:
                if self._committed():
                    self.opened_at = f"after a first commit, {elapsed:.1f}s in"
                elif elapsed > self.open_after:
                    self.opened_at = f"after {elapsed:.1f}s with nothing committed"
                if self.opened_at is not None:
                    self.api.open_gate(self.drip)
            time.sleep(0.02)
        try:
            if process.poll() is None:
                self.paused = paused.is_set()
                process.send_signal(signal.SIGKILL)
                self.killed = True
            self.returncode = process.wait(timeout=60)
        finally:
            try:  # what it started (pool workers, the Spark JVM) goes with it
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for reader in readers:
            reader.join(timeout=30)
        return self

    def _committed(self) -> bool:
        for log in ("_delta_log", "_spark_metadata", "_checkpoints"):
            if glob.glob(os.path.join(self.warehouse, "*", "*", log, "[0-9]*")):
                return True
        return False

    def abort(self) -> None:
        """Kill the process and what it started, if still there (the test run is ending)."""
        if self._process is not None:
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def state_list(self) -> list[dict[str, Any]]:
        return list(self.states.values())

    def describe(self) -> str:
        if self.paused:
            where = f"paused at {self.pause_at}"
        elif self.held:
            where = "while the API held its requests after the first half"
        elif self.killed:
            where = f"no {self.pause_at} within {self.kill_after:.0f}s"
        else:
            where = f"it exited by itself before {self.pause_at}"
        tail = "".join(self.stderr[-40:])
        return (
            f"{self.style}: killed: {self.killed} ({where}; the API held the second half of the requests and let "
            f"them through one every {self.drip:.0f}s {self.opened_at or '(never)'}); exit {self.returncode}; "
            f"{self.state_lines} STATE lines before the kill; last states {json.dumps(self.states)[:1500]}\n"
            f"stderr (last lines):\n{tail}"
        )


@dataclass
class KillOutcome:
    killed: KilledRun
    api: DemoApi
    config: dict[str, Any]
    catalog: dict[str, Any]


class KillRunner:
    """Runs the killed processes in the background, two at a time, while the in-process tests go
    on: a killed run spends most of its life starting and waiting for the API, which the in-process
    tests need not wait for."""

    def __init__(self, workers: int = 2) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="conformance-kill")
        self._runs: list[KilledRun] = []
        self._apis: list[DemoApi] = []
        self.futures: dict[tuple[str, int], Any] = {}

    def plan(self, style: str, concurrency: int, work: str, catalog: dict[str, Any], requests: int, states: int) -> None:
        """Start ``style``'s killed run, reading ``concurrency`` slices at once. ``requests``: how many a whole
        airbyte-cdk sync makes (the API holds those after the first half, see ``KilledRun``); ``states``: how many
        STATE lines a whole sync of ours prints at that concurrency (both known from the style's first syncs)."""
        api = start_api(hold_after=max(1, requests // 2), style=style)  # untouched data: what the first syncs read
        self._apis.append(api)
        config = ours_config(api, os.path.join(work, "warehouse"), concurrency)
        config_path, catalog_path = os.path.join(work, "config.json"), os.path.join(work, "catalog.json")
        for path, content in ((config_path, config), (catalog_path, catalog)):
            with open(path, "w") as handle:
                json.dump(content, handle)
        run = KilledRun(style, config_path, catalog_path, api, config["destination"]["warehouse"],
                        kill_when_held=states == 1, env=client_env(api))
        self._runs.append(run)

        def kill() -> KillOutcome:
            try:
                return KillOutcome(run.run(), api, config, catalog)
            finally:
                api.full_speed()  # for the resume

        self.futures[(style, concurrency)] = self._pool.submit(kill)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for run in self._runs:
            run.abort()
        for api in self._apis:
            api.stop()
