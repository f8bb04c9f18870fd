"""Who holds a token, with limits on who may try them that stop guessing without ever refusing
a valid token.

A wrong token is refused after one HMAC (its check, bayesdp.serve.tokens) and never reaches the
slow hash. An unknown analyst id is checked against a dummy record, so it costs what a wrong
secret for a known id costs.

Failed attempts are limited per client address and per analyst id named (a token bucket of
`rate_per_minute` each); the limit is consulted only after a token has failed, so a valid token
is never refused, even while someone is guessing from the same address or at the same id.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from typing import NoReturn

from bayesdp.serve.state import Analyst, State
from bayesdp.serve.tokens import CHECK_BYTES, hash_secret, new_secret, token_check

# A limiter keeps at most this many keys (addresses, analyst ids), forgetting the least recent.
MAX_KEYS = 100_000


class RateLimiter:
    """A token bucket per key (an analyst; a client address or analyst id for failed
    authentications): `per_minute` requests, refilled continuously."""

    def __init__(self, per_minute: int, max_keys: int = MAX_KEYS) -> None:
        self.rate, self.capacity = per_minute / 60.0, float(per_minute)
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, key: str, *, take: bool = True) -> float:
        """0 if a request may go now (and, with `take`, takes a token), else seconds until one may."""
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.pop(key, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - last) * self.rate)
            wait = 0.0 if tokens >= 1 else (1 - tokens) / self.rate
            self._buckets[key] = (tokens - (take and not wait), now)
            while len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
            return wait


class Refused(Exception):
    """A token was refused: `wait` > 0 when failures from its address or at its analyst id are
    over the limit (429, retry after `wait` seconds), else 0 (401)."""

    def __init__(self, wait: float) -> None:
        super().__init__(wait)
        self.wait = wait


class Gate:
    """Who holds a token, with failed attempts limited per address and per analyst id."""

    def __init__(self, state: State, per_minute: int) -> None:
        self.state = state
        self.failures = RateLimiter(per_minute)
        self._lock = threading.Lock()
        # Tokens that passed the slow hash in this process, by a fast digest of the whole token.
        self._verified: dict[bytes, str] = {}
        _, salt, slow, _ = new_secret()
        self._dummy = (salt, slow, secrets.token_bytes(CHECK_BYTES))

    def authenticate(self, token: str, address: str) -> Analyst:
        """The analyst holding `token`; raises `Refused` otherwise."""
        parts = token.split("_", 2)
        analyst_id = parts[1] if len(parts) == 3 and parts[0] == "bdp" and parts[1] else None
        found = self.state.credentials(analyst_id) if analyst_id else None
        analyst, salt, slow, check = (None, *self._dummy) if found is None else found
        keys = [f"address {address}", *([f"analyst {analyst_id}"] if analyst_id else [])]
        secret = parts[2] if analyst_id else token
        fast = token_check(secret, salt)
        if check is None:
            # Issued before checks were stored: only the slow hash can tell, so it is limited too.
            self._refuse_if_limited(keys)
        elif not hmac.compare_digest(fast, check):
            self._fail(keys)
        if analyst is not None and analyst.revoked is None and \
                self._slow(token, secret, salt, slow, analyst.id):
            if check is None:
                self.state.set_token_check(analyst.id, fast)
            return analyst
        self._fail(keys)

    def _slow(self, token: str, secret: str, salt: bytes, slow: bytes, analyst_id: str) -> bool:
        """The slow hash, once per token and process."""
        digest = hashlib.sha256(token.encode()).digest()
        with self._lock:
            if self._verified.get(digest) == analyst_id:
                return True
        if not hmac.compare_digest(hash_secret(secret, salt), slow):
            return False
        with self._lock:
            self._verified[digest] = analyst_id
        return True

    def _refuse_if_limited(self, keys: list[str]) -> None:
        wait = max(self.failures.retry_after(k, take=False) for k in keys)
        if wait:
            raise Refused(wait)

    def _fail(self, keys: list[str]) -> NoReturn:
        self._refuse_if_limited(keys)
        for k in keys:
            self.failures.retry_after(k)
        raise Refused(0.0)
