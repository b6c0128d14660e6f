"""How a call to the MLflow store fails and is tried again (docs/design.md §5).

* A transient failure ("database is locked", a refused connection, an HTTP 429 or 5xx) is
  retried with bounded exponential backoff (`with_retries`: `RETRY_TRIES` tries, sleeping
  `RETRY_BASE_S`, twice that, ..., at most `RETRY_MAX_S`); `total_retries()` counts them.
* After a call gave up on a connection failure, the store at that URI is held down for
  `OUTAGE_HOLD_S` seconds (`hold`): calls within the hold fail fast (`check_not_held`) or are
  kept by the tracker, so that no minutes are lost against a dead server.
* A tracking server that does not answer (a refused connection, an unknown host, a time-out)
  is named as such in every message (`store_failure`): `MLflow tracking server unreachable at
  URI (why)`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

# Our own retries of a transient failure: RETRY_TRIES attempts, sleeping RETRY_BASE_S, twice that,
# ... (at most RETRY_MAX_S) in between: 0.2 + 0.4 + 0.8 + 1.6 = 3 s of waiting at most per call.
RETRY_TRIES = 5
RETRY_BASE_S = 0.2
RETRY_MAX_S = 2.0
# after a call gave up on a connection failure, later calls to that URI within this many seconds
# are kept for later without trying (finish still tries)
OUTAGE_HOLD_S = 30.0

_TRANSIENT = (
    "database is locked",
    "database table is locked",
    "connection refused",
    "failed to establish a new connection",
    "max retries exceeded",
    "connection reset",
    "connection aborted",
    "remote end closed",
    "temporarily unavailable",
    "timed out",
    "timeout",
    "too many 5",  # urllib3: "too many 500 error responses"
    "bad gateway",
    "service unavailable",
)
_CONNECTION = (
    "connection refused",
    "failed to establish a new connection",
    "max retries exceeded",
    "timed out",
    "timeout",
    "connection reset",
    "connection aborted",
    "remote end closed",
)
_retries = 0  # retries taken by this process (total_retries())
_down_until: dict[str, float] = {}  # tracking URI -> time.monotonic() before which calls wait


def total_retries() -> int:
    """How many times this process retried a tracking call after a transient failure."""
    return _retries


def error_chain(err: BaseException) -> Iterator[BaseException]:
    """`err`, then its cause or context, and theirs (eight at most)."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen and len(seen) < 8:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def is_connection_failure(err: BaseException) -> bool:
    """The store did not answer: a refused or broken connection, an unknown host, a time-out."""
    from requests.exceptions import ConnectionError as RequestsConnectionError
    from requests.exceptions import Timeout

    for e in error_chain(err):
        if isinstance(e, (ConnectionError, TimeoutError, RequestsConnectionError, Timeout)):
            return True
        if any(m in str(e).lower() for m in _CONNECTION):
            return True
    return False


# what a failed connection to a server says, in the words a user knows (first match wins)
_REASONS = (
    ("connection refused", "connection refused"),
    ("failed to resolve", "unknown host"),
    ("name or service not known", "unknown host"),
    ("nodename nor servname", "unknown host"),
    ("name resolution", "unknown host"),
    ("no route to host", "no route to host"),
    ("network is unreachable", "network unreachable"),
    ("timed out", "timed out"),
    ("timeout", "timed out"),
    ("connection reset", "connection reset"),
    ("remote end closed", "connection closed by the server"),
)


def brief(err: BaseException) -> str:
    """An exception as one short line: `Type: its text`, whitespace collapsed, 200 characters
    at most."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:200] if text else 'no detail'}"


def _is_server(uri: str) -> bool:
    return uri.split(":", 1)[0].lower() in ("http", "https")


def store_failure(uri: str, err: BaseException, tries: int | None = None) -> str:
    """One line saying what went wrong with the store at `uri`: `MLflow tracking server
    unreachable at URI (connection refused)` when a server did not answer (a refused
    connection, an unknown host, a time-out), else `MLflow unreachable at URI (Type: text)`."""
    count = "" if tries is None else f"; {tries} {'try' if tries == 1 else 'tries'}"
    if _is_server(uri) and is_connection_failure(err):
        texts = " ".join(str(e).lower() for e in error_chain(err))
        why = next((reason for key, reason in _REASONS if key in texts), brief(err))
        return f"MLflow tracking server unreachable at {uri} ({why}{count})"
    return f"MLflow unreachable at {uri} ({brief(err)}{count})"


def is_transient(err: BaseException) -> bool:
    """A failure worth retrying: a locked sqlite database, a refused or broken connection, a
    time-out, an HTTP 429 or 5xx answer of the server."""
    if is_connection_failure(err):
        return True
    for e in error_chain(err):
        if type(e).__name__ == "RestException":  # an answer of the server: its HTTP status
            with contextlib.suppress(Exception):
                status = e.get_http_status_code()
                if status == 429 or status >= 500:
                    return True
        if any(m in str(e).lower() for m in _TRANSIENT):
            return True
    return False


def with_retries(fn: Callable[[], Any], tries: int | None = None) -> tuple[Any, int]:
    """`fn()`, tried again after a transient failure with exponential backoff; the result and
    the retries taken. The last error is raised when every try failed (a non-transient one at
    once), with the tries it took as its `nlpzoo_tries`."""
    global _retries
    tries = max(1, RETRY_TRIES if tries is None else tries)
    taken = 0
    while True:
        try:
            return fn(), taken
        except Exception as err:
            if taken + 1 >= tries or not is_transient(err):
                err.nlpzoo_tries = taken + 1  # type: ignore[attr-defined]
                raise
            time.sleep(min(RETRY_MAX_S, RETRY_BASE_S * 2**taken))
            taken += 1
            _retries += 1


# ---------------------------------------------------------------------- a store that is down


def hold(uri: str) -> None:
    """Hold the store at `uri` down for `OUTAGE_HOLD_S` seconds (a call just gave up on a
    connection failure)."""
    _down_until[uri] = time.monotonic() + OUTAGE_HOLD_S


def held(uri: str) -> bool:
    """Whether the store at `uri` is held down (`hold`) now."""
    return time.monotonic() < _down_until.get(uri, 0.0)


def check_not_held(uri: str) -> None:
    """Fail fast for a URI whose store just gave up on a connection failure."""
    left = _down_until.get(uri, 0.0) - time.monotonic()
    if left > 0:
        err = ConnectionError(f"gave up on this store {OUTAGE_HOLD_S - left:.0f} s ago")
        err.nlpzoo_tries = 0  # type: ignore[attr-defined]
        raise err
