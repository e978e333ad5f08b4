"""Philox-4x32-10 (Salmon et al., SC'11), the counter-based generator behind `op.dropout`.

Element i of a dropout with seed s and offset o uses counter (i + o) as (low word, high word, 0, 0) and key
(s low word, s high word); its uniform is the first output word's top 24 bits times 2^-24, and it is kept
iff that uniform is >= p. Every backend computes the same bits, so the same seed gives the same mask.
"""

from __future__ import annotations

import numpy as np

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
_MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32(counter: np.ndarray, key: tuple[int, int], rounds: int = 10) -> np.ndarray:
    """counter: uint32 array [..., 4]; returns the [..., 4] uint32 outputs."""
    c = counter.astype(np.uint32)
    c0, c1, c2, c3 = (c[..., i].astype(np.uint64) for i in range(4))
    k0, k1 = np.uint32(key[0]), np.uint32(key[1])
    for _ in range(rounds):
        p0, p1 = _M0 * c0, _M1 * c2
        hi0, lo0 = (p0 >> np.uint64(32)) & _MASK32, p0 & _MASK32
        hi1, lo1 = (p1 >> np.uint64(32)) & _MASK32, p1 & _MASK32
        c0, c1, c2, c3 = (hi1 ^ c1 ^ np.uint64(k0)), lo1, (hi0 ^ c3 ^ np.uint64(k1)), lo0
        k0, k1 = np.uint32((int(k0) + int(_W0)) & 0xFFFFFFFF), np.uint32((int(k1) + int(_W1)) & 0xFFFFFFFF)
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def uniforms(n: int, seed: int, offset: int = 0) -> np.ndarray:
    """The dropout uniforms of elements 0..n-1, in [0, 1)."""
    idx = np.arange(n, dtype=np.uint64) + np.uint64(offset)
    counter = np.zeros((n, 4), dtype=np.uint32)
    counter[:, 0] = (idx & _MASK32).astype(np.uint32)
    counter[:, 1] = (idx >> np.uint64(32)).astype(np.uint32)
    words = philox4x32(counter, (seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF))[:, 0]
    return (words >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
