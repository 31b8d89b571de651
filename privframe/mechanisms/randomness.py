"""Sources of random bits for the samplers: the OS CSPRNG, or a seeded stream for tests.

Example:
    >>> from privframe.mechanisms.randomness import SystemRandomness
    >>> SystemRandomness().words(2).dtype.name
    'uint64'
"""

from __future__ import annotations

import abc
import hashlib
import os
import warnings

import numpy as np
import numpy.typing as npt

from privframe.errors import InvalidArgumentError, SeededRandomnessWarning

__all__ = ["Randomness", "SeededRandomness", "SystemRandomness", "resolve_randomness"]


class Randomness(abc.ABC):
    """A source of uniformly random 64-bit words for the samplers.

    Subclasses must be cryptographically secure unless they set ``seeded``.

    Example:
        >>> import privframe as pf
        >>> pf.noise.SystemRandomness().words(3).dtype.name
        'uint64'
    """

    seeded: bool = False

    @abc.abstractmethod
    def words(self, n: int) -> npt.NDArray[np.uint64]:
        """Return ``n`` independent uniform 64-bit words."""


class SystemRandomness(Randomness):
    """The operating system's CSPRNG (``os.urandom``, i.e. getrandom(2) on Linux).

    Example:
        >>> from privframe.mechanisms.noise import SystemRandomness
        >>> len(SystemRandomness().words(4))
        4
    """

    seeded = False

    def words(self, n: int) -> npt.NDArray[np.uint64]:
        """Return ``n`` uniform 64-bit words read from the OS CSPRNG."""
        return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)


class SeededRandomness(Randomness):
    """A reproducible stream for tests and demos: SHAKE-256(seed, counter) blocks.

    Output made with it is NOT private, since anyone with the seed can
    recompute the noise. Every sampler call that uses it emits a
    :class:`~privframe.errors.SeededRandomnessWarning`, and the accountant
    flags the ledger entry of a release that used it.

    Args:
        seed: an integer or bytes; the same seed gives the same stream.

    Example:
        >>> import warnings
        >>> from privframe.mechanisms.noise import SeededRandomness
        >>> a, b = SeededRandomness(7), SeededRandomness(7)
        >>> bool((a.words(4) == b.words(4)).all())
        True
    """

    seeded = True

    def __init__(self, seed: int | bytes) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int | bytes):
            raise InvalidArgumentError(f"seed must be an int or bytes, got {type(seed).__name__}")
        # The type tag keeps int and bytes seeds apart: SeededRandomness(0) != (b"\x00").
        if isinstance(seed, int):
            material = b"int:" + seed.to_bytes((seed.bit_length() + 8) // 8, "little", signed=True)
        else:
            material = b"bytes:" + seed
        self._key = hashlib.sha256(b"privframe-seeded-v1/" + material).digest()
        self._block = 0
        self._buffer = b""

    def words(self, n: int) -> npt.NDArray[np.uint64]:
        """Return the next ``n`` 64-bit words of the seeded stream."""
        need = 8 * n
        parts = [self._buffer]
        have = len(self._buffer)
        while have < need:
            size = max(need - have, 1 << 16)
            block = hashlib.shake_256(self._key + self._block.to_bytes(8, "little"))
            parts.append(block.digest(size))
            self._block += 1
            have += size
        data = b"".join(parts)
        self._buffer = data[need:]
        return np.frombuffer(data[:need], dtype=np.uint64)


def resolve_randomness(rng: Randomness | None) -> Randomness:
    """The caller's source, or the OS CSPRNG; warns loudly when it is seeded.

    Call it from the public sampling function itself: the warning points two
    frames up, at that function's caller.

    Example:
        >>> from privframe.mechanisms.randomness import resolve_randomness
        >>> resolve_randomness(None).seeded
        False
    """
    if rng is None:
        return SystemRandomness()
    if not isinstance(rng, Randomness):
        raise InvalidArgumentError(
            f"rng must be a privframe.noise.Randomness (SystemRandomness or SeededRandomness), "
            f"got {type(rng).__name__}"
        )
    if rng.seeded:
        warnings.warn(
            "privframe is drawing noise from a SEEDED stream: the output is reproducible "
            "and NOT differentially private. Use seeded randomness only in tests and demos.",
            SeededRandomnessWarning,
            stacklevel=3,
        )
    return rng
