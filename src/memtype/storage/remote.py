"""Object storage: a URL (``s3://``, ``https://``, ``http://``) as a zarr store and a few objects.

>>> from memtype.storage.remote import ObjectLocation, is_url
>>> is_url("s3://screens/plate1.zarr"), is_url("/data/plate1.zarr")
(True, False)
>>> plate = ObjectLocation.parse("s3://screens/run1/plate.zarr")       # doctest: +SKIP
>>> zarr.open_group(plate.zarr_store(), mode="r")                      # doctest: +SKIP

The I/O is obstore's (Rust ``object_store``; zarr-python's own :class:`zarr.storage.ObjectStore`
wraps it for arrays and groups): memtype has no HTTP or S3 client of its own. An ``s3://``
URL reaches any S3-compatible endpoint; where it is, and the credentials, come from the
standard environment variables (``AWS_ENDPOINT_URL``, see :data:`ENDPOINT_VARIABLES`;
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``,
``AWS_ALLOW_HTTP`` for a plain-HTTP endpoint) or, without a key in the environment and with
boto3 installed, from boto3's chain (``AWS_PROFILE``, ``~/.aws/config``, SSO, instance
roles); nothing is read from memtype's own files. ``https://`` (and ``http://``) URLs are
read-only: objects are fetched by name, never listed. ``file://`` URLs are local paths
(:func:`local_path`).

Every obstore error becomes one memtype error naming the URL (:func:`translated`): a
missing bucket :class:`~memtype.errors.StoreNotFoundError`, refused credentials
:class:`~memtype.errors.StoreAccessError`, an endpoint that cannot be reached (or stops
answering mid-write) :class:`~memtype.errors.StoreIOError`.

Why obstore rather than fsspec (s3fs): reading a zarr array through ``FsspecStore`` makes a
``HEAD`` and a ``LIST`` request for every key it finds absent (s3fs looks for a "directory"
of that name), where ``ObjectStore`` makes one ``GET``; and it creates objects with
``If-None-Match`` / replaces them with ``If-Match``, which :meth:`ObjectLocation.create`
and the run lease use. ``benchmarks/object_storage.py`` measures both on the same plate
(docs/benchmarks.md, "Object storage").
"""

from __future__ import annotations

import datetime
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from memtype import __version__, require
from memtype.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    MemtypeError,
    StoreAccessError,
    StoreExistsError,
    StoreIOError,
    StoreNotFoundError,
    StoreReadOnlyError,
)

if TYPE_CHECKING:
    from obstore.store import RetryConfig, S3Config

__all__ = ["ObjectLocation", "is_url", "local_path", "translated", "RETRY", "ENDPOINT_VARIABLES",
           "s3_endpoint"]

_REMOTE = ("s3", "https", "http")
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")

RETRY: RetryConfig = {
    "max_retries": 4,
    "retry_timeout": datetime.timedelta(seconds=20),
    "backoff": {"init_backoff": datetime.timedelta(milliseconds=100),
                "max_backoff": datetime.timedelta(seconds=2), "base": 2},
}
"""How often a failed request is tried again (a 5xx answer, a dropped connection) before
the error reaches the caller: 4 times within 20 s, backing off from 0.1 s to 2 s."""

ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT")
"""Where an ``s3://`` URL's endpoint is named, first set wins: boto3 reads the first two in
this order, obstore all three (``AWS_ENDPOINT`` is its own spelling)."""


def is_url(location: object) -> bool:
    """Whether ``location`` is an object-storage URL (``s3://``, ``https://``, ``http://``).

    ``file://`` URLs and paths are local (False); an unknown scheme is an error.

    Raises
    ------
    InvalidArgumentError
        A URL of a scheme memtype does not read (``gs://``, ``ftp://``; a ``ValueError``).
    """
    if not isinstance(location, str):
        return False
    match = _SCHEME.match(location)
    if match is None:
        return False
    scheme = match.group(1).lower()
    if scheme == "file":
        return False
    if scheme not in _REMOTE:
        raise InvalidArgumentError(
            f"Unsupported URL scheme {scheme!r} in {location!r}; expected s3://, https://, "
            "http://, file:// or a local path.")
    return True


def local_path(location: str | os.PathLike[str]) -> str:
    """The local path of a ``file://`` URL, or ``location`` itself (a path)."""
    text = os.fspath(location)
    if text.lower().startswith("file://"):
        parts = urlsplit(text)
        if parts.netloc not in ("", "localhost"):
            raise InvalidArgumentError(
                f"A file:// URL names a local path; received host {parts.netloc!r} in "
                f"{text!r} (expected file:///path).")
        return parts.path
    return text


@dataclass(frozen=True)
class ObjectLocation:
    """A place in an object store: a bucket (or web server) and a key prefix.

    Pickles as its URL; each process opens its own client (see :meth:`client`).

    Parameters
    ----------
    url : str
        ``s3://bucket/prefix`` or ``https://host/path`` (no trailing slash).
    """

    url: str

    @classmethod
    def parse(cls, url: str) -> ObjectLocation:
        """The location of an ``s3://``, ``https://`` or ``http://`` URL.

        Raises
        ------
        InvalidArgumentError
            Not such a URL, or one without a bucket or host (a ``ValueError``).
        """
        if not isinstance(url, str):
            raise ArgumentTypeError(f"An object-storage URL is a str; received "
                                    f"{type(url).__name__}.")
        if not is_url(url):
            raise InvalidArgumentError(f"Expected an s3://, https:// or http:// URL; received "
                                       f"{url!r}.")
        parts = urlsplit(url)
        if not parts.netloc:
            raise InvalidArgumentError(f"The URL {url!r} names no bucket or host; expected "
                                       "s3://bucket/path or https://host/path.")
        if parts.query or parts.fragment:
            raise InvalidArgumentError(f"The URL {url!r} has a query or fragment; expected "
                                       "s3://bucket/path or https://host/path alone.")
        return cls(url.rstrip("/"))

    @property
    def scheme(self) -> str:
        """``"s3"``, ``"https"`` or ``"http"``."""
        return urlsplit(self.url).scheme.lower()

    @property
    def bucket(self) -> str:
        """The bucket (``s3``) or host."""
        return urlsplit(self.url).netloc

    @property
    def prefix(self) -> str:
        """The key prefix inside the bucket (no leading or trailing slash)."""
        return urlsplit(self.url).path.strip("/")

    @property
    def writable(self) -> bool:
        """Whether memtype writes here (``s3://``; web servers are read-only)."""
        return self.scheme == "s3"

    @property
    def name(self) -> str:
        """The last part of the path (``plate.zarr``), or the bucket's name."""
        return self.prefix.rsplit("/", 1)[-1] or self.bucket

    def child(self, relative: str) -> ObjectLocation:
        """The location ``relative`` below this one (``a/b``; no ``..``)."""
        parts = [p for p in relative.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise InvalidArgumentError(f"{relative!r} leads outside {self.url!r}; expected a "
                                       "path below it.")
        return ObjectLocation("/".join([self.url, *parts])) if parts else self

    def describe(self) -> str:
        """Where the location is served from (the endpoint of an s3 URL)."""
        if self.scheme != "s3":
            return f"{self.scheme}://{self.bucket}"
        return s3_endpoint() or "AWS S3"

    # -- clients ---------------------------------------------------------------------------
    def client(self) -> Any:
        """This process's obstore store for the location (opened once per process)."""
        return _client(self.url, os.getpid(), s3_endpoint() if self.scheme == "s3" else "")

    def zarr_store(self, *, read_only: bool = True) -> Any:
        """zarr-python's :class:`zarr.storage.ObjectStore` rooted at this location.

        Raises
        ------
        StoreReadOnlyError
            ``read_only=False`` on a web server (a ``PermissionError``).
        """
        require("zarr", "OME-Zarr plates on object storage")
        from zarr.storage import ObjectStore

        if not read_only:
            self._check_writable("write to")
        return ObjectStore(self.client(), read_only=read_only)

    def _check_writable(self, action: str) -> None:
        """StoreReadOnlyError unless memtype writes to this location."""
        if not self.writable:
            raise StoreReadOnlyError(
                f"Cannot {action} {self.url!r}: {self.scheme}:// locations are read-only; "
                "expected an s3:// URL for outputs.")

    # -- objects ---------------------------------------------------------------------------
    def get(self, key: str) -> bytes | None:
        """The bytes of object ``key`` below the location, or None when there is none."""
        import obstore
        from obstore import exceptions as ox

        with translated(self, f"read {key!r} from"):
            try:
                return bytes(obstore.get(self.client(), key).bytes())
            except (FileNotFoundError, ox.NotFoundError) as exc:  # obstore raises both
                _raise_if_no_bucket(exc, self)
                return None

    def head(self, key: str) -> dict[str, Any] | None:
        """Object ``key``'s size, ``e_tag`` and ``last_modified``, or None."""
        import obstore
        from obstore import exceptions as ox

        with translated(self, f"look up {key!r} in"):
            try:
                return dict(obstore.head(self.client(), key))
            except (FileNotFoundError, ox.NotFoundError) as exc:
                _raise_if_no_bucket(exc, self)
                return None

    def put(self, key: str, data: bytes, *, if_match: str | None = None) -> str:
        """Write object ``key`` (replacing it; with ``if_match``, only while its ETag is that,
        else :class:`~memtype.errors.StoreExistsError`); the ETag of what was written (from
        the write's own answer: a later look-up may see another writer's object)."""
        import obstore

        self._check_writable("write to")
        mode: Any = None if if_match is None else {"e_tag": if_match}
        with translated(self, f"write {key!r} to"):
            return str(obstore.put(self.client(), key, data, mode=mode).get("e_tag") or "")

    def create(self, key: str, data: bytes) -> bool:
        """Write object ``key`` only if there is none (``If-None-Match: *``); whether it
        was written (False: one exists, left as it is)."""
        return self.create_tagged(key, data) is not None

    def create_tagged(self, key: str, data: bytes) -> str | None:
        """:meth:`create`, returning the written object's ETag (None: one exists)."""
        import obstore

        self._check_writable("write to")
        try:
            with translated(self, f"create {key!r} in"):
                done = obstore.put(self.client(), key, data, mode="create")
        except StoreExistsError:
            return None
        return str(done.get("e_tag") or "")

    def delete(self, key: str) -> None:
        """Remove object ``key`` (nothing happens when there is none)."""
        import obstore

        self._check_writable("delete from")
        with translated(self, f"delete {key!r} from"):
            obstore.delete(self.client(), key)

    def keys(self, prefix: str = "") -> list[str]:
        """The keys below ``prefix`` (a folder such as ``.memtype/done``), in key order;
        one request per 1000 keys (used for memtype's own records, never to find images)."""
        import obstore

        self._check_writable("list")  # web servers have no listing
        where = _folder(prefix)
        with translated(self, f"list {prefix or '/'!r} in"):
            return sorted(meta["path"] for batch in obstore.list(self.client(), where)
                          for meta in batch)

    def list_some(self, prefix: str = "", count: int = 1) -> list[str]:
        """Up to ``count`` keys below ``prefix`` (one request): whether a prefix is empty."""
        import obstore

        self._check_writable("list")
        where = _folder(prefix)
        with translated(self, f"list {prefix or '/'!r} in"):
            for batch in obstore.list(self.client(), where, chunk_size=count):
                return [meta["path"] for meta in batch][:count]
        return []

    def any(self, prefix: str = "") -> bool:
        """Whether any object lies below ``prefix`` (one request)."""
        return bool(self.list_some(prefix, 1))

    def delete_all(self, prefix: str = "", *, keep: tuple[str, ...] = ()) -> None:
        """Remove every object below ``prefix`` (``""``: everything at the location) but the
        keys in ``keep``; 1000 a request."""
        import obstore

        keys = [k for k in self.keys(prefix) if k not in keep]
        with translated(self, f"delete {prefix or '/'!r} from"):
            for start in range(0, len(keys), 1000):
                obstore.delete(self.client(), keys[start:start + 1000])


def s3_endpoint() -> str:
    """The S3 endpoint the environment names, ``""`` for AWS's own: the first set of
    :data:`ENDPOINT_VARIABLES` (the one decision behind the client, its cache and messages)."""
    return next((os.environ[name] for name in ENDPOINT_VARIABLES if os.environ.get(name)), "")


def _folder(prefix: str) -> str | None:
    """``prefix`` as obstore's list prefix: a folder (``a/b/``), None for the whole location
    (``a/b`` alone would also match ``a/bc``)."""
    stripped = prefix.strip("/")
    return stripped + "/" if stripped else None


_CLIENTS: dict[tuple[str, int, str], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _client(url: str, pid: int, endpoint: str) -> Any:
    """The obstore store of ``url`` in process ``pid`` for ``endpoint`` (one per URL,
    process and endpoint: a forked worker opens its own)."""
    with _CLIENTS_LOCK:
        found = _CLIENTS.get((url, pid, endpoint))
        if found is None:
            found = _CLIENTS[(url, pid, endpoint)] = _open(url)
        return found


def _open(url: str) -> Any:
    """A new obstore store for ``url`` (environment credentials; see the module)."""
    require("obstore", "Reading and writing plates on object storage (s3://, https://)")
    from obstore.store import HTTPStore, S3Store

    if url.lower().startswith("s3://"):
        endpoint = s3_endpoint()
        config: S3Config = {"endpoint": endpoint} if endpoint else {}
        return S3Store.from_url(url, config=config, retry_config=RETRY,
                                credential_provider=_credential_provider(url),
                                client_options=_client_options(endpoint))
    return HTTPStore.from_url(url, retry_config=RETRY,
                              client_options=_client_options(url))


def _client_options(endpoint: str) -> Any:
    """obstore client options: plain HTTP allowed for an ``http://`` endpoint; a user agent
    naming memtype and the process (so a server's log tells workers apart)."""
    options = {"user_agent": f"memtype/{__version__} (pid {os.getpid()})"}
    return {**options, "allow_http": True} if endpoint.lower().startswith("http://") \
        else options


def _credential_provider(url: str) -> Any:
    """boto3's credential chain where the environment has no key and boto3 is installed
    (profiles, ``~/.aws/config``, SSO, instance roles); else None (the environment's).

    Raises
    ------
    StoreAccessError
        boto3's chain finds no credentials at all (obstore's provider would raise a bare
        ``ValueError``).
    """
    import importlib.util

    if "AWS_ACCESS_KEY_ID" in os.environ or importlib.util.find_spec("boto3") is None:
        return None
    if os.environ.get("AWS_SKIP_SIGNATURE", "").lower() in ("1", "true"):
        return None
    import boto3
    from obstore.auth.boto3 import Boto3CredentialProvider

    session = boto3.Session()
    if session.get_credentials() is None:
        raise StoreAccessError(
            f"No credentials for {url!r}: expected AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or an AWS profile: AWS_PROFILE, ~/.aws/credentials), or "
            "AWS_SKIP_SIGNATURE=1 for a public bucket; received none of them.")
    return Boto3CredentialProvider(session)


def _raise_if_no_bucket(exc: BaseException, location: ObjectLocation) -> None:
    """StoreNotFoundError when an error says the bucket itself is missing."""
    if "NoSuchBucket" in str(exc):
        raise StoreNotFoundError(
            f"The bucket {location.bucket!r} of {location.url!r} does not exist at "
            f"{location.describe()}; expected an existing bucket (create it, or check the URL "
            "and AWS_ENDPOINT_URL).") from exc


def _first_line(exc: BaseException) -> str:
    """The first line of an obstore error (its full text holds a debug dump)."""
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


@contextmanager
def translated(location: ObjectLocation, action: str) -> Iterator[None]:
    """Turn obstore's errors inside the block into one memtype error naming the URL.

    ``action`` says what was being done (``"write 'B/3/0/zarr.json' to"``).

    Raises
    ------
    StoreNotFoundError
        A missing bucket (a ``FileNotFoundError``).
    StoreAccessError
        Credentials refused or missing (a ``PermissionError``).
    StoreExistsError
        A conditional write found the object there (``If-None-Match``) or changed
        (``If-Match``) (a ``FileExistsError``).
    StoreIOError
        The endpoint cannot be reached or answered with an error (an ``OSError``).
    """
    from obstore import exceptions as ox

    try:
        yield
    except MemtypeError:
        raise
    except (ox.AlreadyExistsError, ox.PreconditionError) as exc:
        raise StoreExistsError(f"Cannot {action} {location.url!r}: the object exists or was "
                               f"changed by another writer ({_first_line(exc)}).") from exc
    except (ox.PermissionDeniedError, ox.UnauthenticatedError) as exc:
        raise StoreAccessError(
            f"Cannot {action} {location.url!r}: {location.describe()} refused the request "
            "(wrong or missing credentials, or no permission); expected credentials in "
            "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or an AWS_PROFILE that may do this "
            f"({_first_line(exc)}).") from exc
    except (FileNotFoundError, ox.BaseError) as exc:  # obstore raises both for "not found"
        _raise_if_no_bucket(exc, location)
        if isinstance(exc, (FileNotFoundError, ox.NotFoundError)):
            raise StoreNotFoundError(f"Cannot {action} {location.url!r}: not found "
                                     f"({_first_line(exc)}).") from exc
        raise StoreIOError(f"Cannot {action} {location.url!r}: {location.describe()} "
                           f"{_what_failed(exc)} ({_first_line(exc)}).") from exc


def _what_failed(exc: BaseException) -> str:
    """What an obstore error says happened: no connection, or an error answered."""
    text = str(exc)
    if "error sending request" in text or "connect" in text.lower():
        return "could not be reached (or stopped answering)"
    return "answered with an error"
