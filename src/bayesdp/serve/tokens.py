"""Analysts' tokens: `bdp_<analyst id>_<secret>` with a 256-bit secret, of which the state keeps
its scrypt hash (RFC 7914) and a check of 32 bits, HMAC-SHA256 of the secret keyed by the
analyst's salt (RFC 2104), truncated. A guess passes the check with probability 2^-32, so wrong
tokens need no slow hash; the check tells a thief of the state 32 of the secret's 256 bits, which
leaves the secret out of reach.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

# scrypt cost (RFC 7914): 16 MiB and tens of milliseconds per check make a stolen table slow to attack.
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "maxmem": 64 * 2**20, "dklen": 32}
CHECK_BYTES = 4


def hash_secret(secret: str, salt: bytes) -> bytes:
    """scrypt (Percival 2009, RFC 7914) of a token's secret part."""
    return hashlib.scrypt(secret.encode(), salt=salt, **_SCRYPT)


def token_check(secret: str, salt: bytes) -> bytes:
    """The cheap check of a secret: HMAC-SHA256 keyed by the salt (RFC 2104), first 4 bytes."""
    return hmac.new(salt, secret.encode(), hashlib.sha256).digest()[:CHECK_BYTES]


def new_secret() -> tuple[str, bytes, bytes, bytes]:
    """A new secret with its salt, scrypt hash and cheap check."""
    secret, salt = secrets.token_urlsafe(32), secrets.token_bytes(16)
    return secret, salt, hash_secret(secret, salt), token_check(secret, salt)
