"""HTTP basic auth against bcrypt hashes, as Prometheus exporters check it (exporter-toolkit).

bcrypt is slow on purpose (cost 10: ~60 ms here, cost 12: ~280 ms), and Prometheus sends the same
credentials with every scrape, so a verified (user, stored hash, password) is remembered for a
few minutes: a scrape every 15 s then pays for one bcrypt per `ttl_s`. Only successes are
remembered, so guesses can neither fill the cache nor push a good entry out of it. The cache key
is an HMAC under a per-process random key: the password itself is never kept. bcrypt runs one at a
time (it releases the GIL, so a flood of guesses takes one core and never stalls a poll), and an
unknown user is checked against a real user's hash, so timing tells no user name apart.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import threading
from typing import Mapping

import bcrypt
from cachetools import TTLCache

CACHE_TTL_S = 300.0
CACHE_SIZE = 256


class BasicAuth:
    def __init__(self, users: Mapping[str, bytes], ttl_s: float = CACHE_TTL_S) -> None:
        if not users:
            raise ValueError("basic auth needs at least one user")
        self._users = {name.encode(): hashed for name, hashed in users.items()}
        self._decoy = next(iter(self._users.values()))  # an unknown user costs as much as a known one
        self._key = os.urandom(32)
        self._verified: TTLCache[bytes, bool] = TTLCache(CACHE_SIZE, ttl_s)
        self._cache_lock = threading.Lock()
        self._bcrypt_lock = threading.Lock()
        self.bcrypt_checks = 0  # how many times bcrypt ran (tests and the bench read it)

    def check(self, authorization: str | None) -> bool:
        """Whether an Authorization header value carries the password of a configured user."""
        credentials = _basic_credentials(authorization)
        if credentials is None:
            return False
        user, password = credentials
        stored = self._users.get(user)
        hashed = stored if stored is not None else self._decoy
        key = hmac.digest(self._key, b"%d:%s:%s:%s" % (len(user), user, hashed, password), hashlib.sha256)
        with self._cache_lock:
            if stored is not None and key in self._verified:
                return True
        with self._bcrypt_lock:
            self.bcrypt_checks += 1
            try:
                ok = bcrypt.checkpw(password, hashed)
            except ValueError:  # bcrypt refuses passwords over 72 bytes
                ok = False
        if ok and stored is not None:
            with self._cache_lock:
                self._verified[key] = True
            return True
        return False


def _basic_credentials(authorization: str | None) -> tuple[bytes, bytes] | None:
    """(user, password) of a `Basic` Authorization header, None for anything else."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, colon, password = decoded.partition(b":")
    return (user, password) if colon else None
