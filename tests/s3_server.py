"""A real S3-compatible server for the tests: moto's server (``moto[server]``) on a free
localhost port, in a thread of the test process, with credentials in the standard AWS
environment variables that memtype's object-storage stores read (no network beyond
localhost, no Docker).

The ``s3`` fixture (imported by tests/conftest.py) starts one per test session and sets its
environment for each test that uses it; :func:`started` starts another, for a test that
stops its server mid-write. :class:`S3Server` counts the requests
the server answered, by method and by the S3 operation (``LIST`` for a listing), so a test
can say how many a read made.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

__all__ = ["S3Server", "started", "ENVIRONMENT", "s3", "s3_session_server"]

ENVIRONMENT = {"AWS_ACCESS_KEY_ID": "memtype-test", "AWS_SECRET_ACCESS_KEY": "memtype-test",
               "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_ALLOW_HTTP": "true"}
"""The environment every client in the tests (and their subprocesses) gets; the endpoint
(``AWS_ENDPOINT_URL``) is the server's own address."""


@dataclass
class S3Server:
    """A running moto S3 server: its endpoint and the requests it has answered."""

    endpoint: str
    server: Any
    requests: list[tuple[str, str]] = field(default_factory=list)
    """(method, path with query) of every request answered, in order."""
    agents: list[str] = field(default_factory=list)
    """The ``User-Agent`` of each request, in the same order."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def environment(self) -> dict[str, str]:
        """The variables a client (or a subprocess) needs to reach this server."""
        return {**ENVIRONMENT, "AWS_ENDPOINT_URL": self.endpoint}

    def bucket(self, prefix: str = "memtype") -> str:
        """A new, empty bucket of a unique name."""
        import boto3

        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        client = boto3.client("s3", endpoint_url=self.endpoint, **_credentials())
        client.create_bucket(Bucket=name)
        return name

    def record(self, method: str, path: str, agent: str = "") -> None:
        """Count one request (called by the server's request handler)."""
        with self._lock:
            self.requests.append((method, path))
            self.agents.append(agent)

    def calls(self, mark: int, method: str, fragment: str) -> list[tuple[str, str]]:
        """(User-Agent, path) of the ``method`` requests after ``mark`` whose path holds
        ``fragment``."""
        with self._lock:
            done = list(zip(self.requests[mark:], self.agents[mark:], strict=True))
        return [(agent, path) for (asked, path), agent in done
                if asked == method and fragment in path]

    def mark(self) -> int:
        """How many requests have been answered so far (see :meth:`since`)."""
        with self._lock:
            return len(self.requests)

    def since(self, mark: int) -> Counter[str]:
        """The requests answered after ``mark``, counted by kind: ``GET``, ``PUT``,
        ``HEAD``, ``DELETE``, ``POST`` and ``LIST`` (a GET of a bucket with a listing
        query)."""
        with self._lock:
            done = self.requests[mark:]
        return Counter(_kind(method, path) for method, path in done)

    def stop(self) -> None:
        """Stop answering (a network failure for every client)."""
        self.server.stop()


def _kind(method: str, path: str) -> str:
    """``LIST`` for a listing request, else the HTTP method."""
    where, _, query = path.partition("?")
    is_bucket = where.strip("/").count("/") == 0
    listing = method == "GET" and is_bucket and ("list-type" in query or "prefix" in query
                                                 or not query)
    return "LIST" if listing else method


def _credentials() -> dict[str, str]:
    """boto3's keyword arguments for the test credentials."""
    return {"aws_access_key_id": ENVIRONMENT["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": ENVIRONMENT["AWS_SECRET_ACCESS_KEY"],
            "region_name": ENVIRONMENT["AWS_REGION"]}


def _counting_server(counter: list[S3Server]) -> Any:
    """A ThreadedMotoServer on a free port whose handler counts each request."""
    from moto.moto_server.threaded_moto_server import MotoRequestHandler
    from moto.server import ThreadedMotoServer

    class Counting(MotoRequestHandler):  # type: ignore[misc]
        def log_request(self, code: Any = "-", size: Any = "-") -> None:
            if counter:
                counter[0].record(self.command, self.path,
                                  str(self.headers.get("User-Agent", "")))

    class Server(ThreadedMotoServer):  # type: ignore[misc]
        def _server_entry(self) -> None:
            from moto.moto_server.werkzeug_app import (
                DomainDispatcherApplication,
                create_backend_app,
            )
            from werkzeug.serving import make_server

            app = DomainDispatcherApplication(create_backend_app)
            self._server = make_server(self._ip_address, self._port, app, True,
                                       request_handler=Counting)
            self._server_ready_event.set()
            self._server.serve_forever()

    return Server(ip_address="127.0.0.1", port=0, verbose=False)


@contextmanager
def started() -> Iterator[S3Server]:
    """A fresh moto S3 server on a free localhost port, stopped on exit (the clients'
    environment is :meth:`S3Server.environment`; the ``s3`` fixture sets it)."""
    holder: list[S3Server] = []
    server = _counting_server(holder)
    server.start()
    host, port = server.get_host_and_port()
    s3 = S3Server(f"http://{host}:{port}", server)
    holder.append(s3)
    try:
        yield s3
    finally:
        if server._server_ready_event.is_set():
            server.stop()


@pytest.fixture(scope="session")
def s3_session_server() -> Iterator[S3Server]:
    """One moto S3 server for the whole test session."""
    with started() as server:
        yield server


@pytest.fixture
def s3(s3_session_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The session's S3 server, with its endpoint and the test credentials in the
    environment for this test (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``...)."""
    for key, value in s3_session_server.environment().items():
        monkeypatch.setenv(key, value)
    return s3_session_server
