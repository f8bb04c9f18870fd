"""Where randomness comes from: an OS-seeded CSPRNG by default, a seeded generator for tests only."""

from __future__ import annotations

import secrets

import numpy as np
import randomgen

Rng = np.random.Generator


def secure_rng() -> Rng:
    """A fresh AES-CTR generator keyed with 256 bits from the OS; one per call, so forks share no stream."""
    return np.random.Generator(randomgen.AESCounter(seed=secrets.randbits(256)))


def rng_for_tests(seed: int) -> Rng:
    """A reproducible generator. NOT private: whoever knows the seed can undo the noise. Tests only."""
    return np.random.default_rng(seed)


def resolve_rng(rng: Rng | None) -> Rng:
    """The caller's generator (documented as not private) or a fresh secure one."""
    if rng is None:
        return secure_rng()
    if not isinstance(rng, np.random.Generator):
        from bayesdp.errors import invalid

        raise invalid("rng", rng, "None (secure randomness) or a numpy.random.Generator (tests only)")
    return rng


def uint64(rng: Rng, size: int) -> np.ndarray:
    """`size` independent uniform 64-bit words."""
    words: np.ndarray = rng.bit_generator.random_raw(size)
    return words
