"""The worker protocol, version 1 (docs/protocol.md): subjects, messages and limits."""

from __future__ import annotations

import hashlib
import re
from typing import Any

VERSION = "w1"
ROOT = f"jobgate.{VERSION}."
MAX_REQUEST = 128 << 10
CHUNK_SIZE = 256 << 10
MAX_WAIT_MS = 10_000
MAX_RUNNING_TENANTS = 1024
MAX_BUSY = 2048
HEADER_SEQ = "Jobgate-Seq"
HEADER_LAST = "Jobgate-Last"
# Bounds one request outside a next request's wait.
OP_TIMEOUT = 10.0
# Bounds the wait a refusal's retry_after_ms may ask for.
MAX_RETRY_AFTER = 3600.0

_TYPE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_CREDENTIAL = re.compile(r"^(jobgate|[0-9a-f]{16})$")
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_WORKER_NAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")


def subject(cred: str, typ: str, op: str) -> str:
    return f"{ROOT}{cred}.{typ}.{op}"


def upload_subject(cred: str, typ: str, host: str, upload_id: str) -> str:
    return f"{ROOT}{cred}.{typ}.up.{host}.{upload_id}"


def inbox_prefix(cred: str) -> str:
    """The reply-subject prefix a credential's connections must use."""
    return f"_JG_W.{cred}"


def credential_id(user: str) -> str:
    """The id of the credential whose NATS user name is user."""
    return hashlib.sha256(b"jobgate worker credential v1\x00" + user.encode()).hexdigest()[:16]


def valid_type_name(s: str) -> bool:
    return bool(_TYPE_NAME.match(s))


def valid_credential(s: str) -> bool:
    return bool(_CREDENTIAL.match(s))


def valid_token(s: Any) -> bool:
    return isinstance(s, str) and bool(_TOKEN.match(s))


def valid_worker_name(s: str) -> bool:
    return bool(_WORKER_NAME.match(s))


class WireError(Exception):
    """A refused request: the reply's error. ``canceled`` is set on a lost beat whose job its owner
    canceled; ``failed`` on a refused upload whose job jobgate failed itself (report nothing more)."""

    def __init__(
        self, code: str, message: str, canceled: bool = False, failed: bool = False, retry_after: float = 0.0
    ) -> None:
        self.code = code
        self.message = message
        self.canceled = canceled
        self.failed = failed
        # The wait a throttled refusal asks for before the next request, in seconds (0: none).
        self.retry_after = retry_after
        super().__init__(f"{code}: {message}")


def valid_assignment(a: Any, typ: str) -> bool:
    return (
        isinstance(a, dict)
        and isinstance(a.get("key"), str)
        and bool(a["key"])
        and isinstance(a.get("token"), str)
        and bool(a["token"])
        and isinstance(a.get("id"), str)
        and a.get("type") == typ
        and isinstance(a.get("attempt"), int)
        and isinstance(a.get("timeout_ms"), int | float)
        and a["timeout_ms"] > 0
    )
