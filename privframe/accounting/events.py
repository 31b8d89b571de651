"""Mechanism events: what a release was made of, serializable and replayable.

A ledger entry can carry the *events* it was made of, in the spirit of
dp_accounting's ``DpEvent``: a tree of mechanism descriptions that any
accountant can replay (for instance :class:`privframe.accounting.rdp.RDPAccountant`). The
events are small frozen dataclasses that validate on construction and
round-trip through plain dicts (and so JSON) tagged with a ``"type"`` and a
format ``"version"``.

* :class:`GaussianEvent` -- a Gaussian mechanism with noise multiplier σ/Δ
  (σ the noise standard deviation, Δ the L2 sensitivity of the whole released
  vector, so accounting needs no dimension; it is recorded when public).
  ``discrete=True`` marks the discrete Gaussian on ℤ, whose Rényi divergences
  are at most those of the
  continuous Gaussian with the same σ/Δ (Canonne, Kamath & Steinke 2020,
  "The Discrete Gaussian for Differential Privacy", Thm. 4 / Cor. 9 for
  integer sensitivity).
* :class:`PoissonSampledEvent` -- an event run on a Poisson subsample (each
  privacy unit kept independently with probability q), as in DP-SGD.
* :class:`SelfComposedEvent` -- one event repeated ``count`` times.
* :class:`ComposedEvent` -- several events in sequence (adaptively chosen).
* :class:`ThresholdEvent` -- private partition selection: noisy counts costing
  ``rho`` (zCDP) plus a ``delta`` spent outright (Desfontaines et al. 2022).
* :class:`LaplaceEvent` -- a Laplace mechanism with noise multiplier b/Δ₁
  (b the noise scale, Δ₁ the L1 sensitivity of the whole released vector):
  ε-DP with ε = Δ₁/b (Dwork, McSherry, Nissim & Smith 2006). ``discrete=True``
  marks the discrete Laplace on ℤ, ε-DP with the same ε for integer
  sensitivity (Canonne, Kamath & Steinke 2020, Sec. 2.2; Ghosh, Roughgarden &
  Sundararajan 2012).
* :class:`PureDPEvent` -- a mechanism known only to be ε-DP, e.g. privframe's
  exponential-mechanism quantiles under a pure-DP budget (McSherry & Talwar
  2007).

Example:
    >>> from privframe.accounting.events import GaussianEvent, PoissonSampledEvent
    >>> from privframe.accounting.events import SelfComposedEvent, from_json
    >>> step = PoissonSampledEvent(0.01, GaussianEvent(1.1))
    >>> session = SelfComposedEvent(step, 1000)
    >>> from_json(session.to_json()) == session
    True
    >>> session.to_dict()["type"], session.to_dict()["version"]
    ('self_composed', 1)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

from privframe.errors import InvalidArgumentError, InvalidValueError
from privframe.numeric import (
    check_count,
    check_delta,
    check_nonnegative,
    check_positive,
    check_real,
    round_up,
)

__all__ = [
    "EVENT_FORMAT_VERSION",
    "ComposedEvent",
    "Event",
    "GaussianEvent",
    "LaplaceEvent",
    "NoiseEvent",
    "PoissonSampledEvent",
    "PureDPEvent",
    "SelfComposedEvent",
    "ThresholdEvent",
    "ZCDPEvent",
    "from_dict",
    "from_json",
]

EVENT_FORMAT_VERSION = 3
"""The newest version of the dict format :meth:`Event.to_dict` writes.

Version 2 adds GaussianEvent's ``dimension``; version 3 adds the pure-DP
events (:class:`LaplaceEvent`, :class:`PureDPEvent`). An event is written in
the oldest version that holds it (version 1 unless it has a dimension or is a
pure-DP event), so older readers still read every event they can represent,
and refuse a pure-DP event by its version rather than misread it.

Readers accept exactly the versions they know; a newer file is refused rather
than misread (an accountant that misreads an event could under-count privacy
loss).
"""


def _check_event(name: str, value: object) -> Event:
    if not isinstance(value, Event):
        raise InvalidArgumentError(f"{name} must be a privframe event, got {type(value).__name__}")
    return value


class Event:
    """Base class of the mechanism events; use the subclasses.

    Subclasses define ``TYPE`` (the dict tag) and the fields of their dataclass.

    Example:
        >>> isinstance(GaussianEvent(1.0), Event)
        True
    """

    TYPE: ClassVar[str] = ""
    SINCE: ClassVar[int] = 1
    """The format version that introduced this event type."""

    def _payload(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"type": ..., "version": 1, <fields>}``; nested events nest.

        The version is the oldest that holds the event (see
        :data:`EVENT_FORMAT_VERSION`).

        Example:
            >>> GaussianEvent(2.0).to_dict()
            {'type': 'gaussian', 'version': 1, 'noise_multiplier': 2.0, 'discrete': False}
            >>> PureDPEvent(0.5).to_dict()
            {'type': 'pure_dp', 'version': 3, 'epsilon': 0.5}
        """
        payload = self._payload()
        version = max(self.SINCE, 2 if "dimension" in payload else 1)
        return {"type": self.TYPE, "version": version, **payload}

    def to_json(self) -> str:
        """:meth:`to_dict` as a JSON string (keys in a fixed order).

        Example:
            >>> ZCDPEvent(0.25).to_json()
            '{"type": "zcdp", "version": 1, "rho": 0.25}'
        """
        return json.dumps(self.to_dict())


@dataclass(frozen=True)
class NoiseEvent(Event):
    """Additive noise with a noise multiplier (scale over sensitivity); use the subclasses.

    :class:`GaussianEvent` and :class:`LaplaceEvent` share its fields, checks
    and dict form; ``dimension`` takes no part in ``==`` or hashing.

    Example:
        >>> isinstance(LaplaceEvent(2.0), NoiseEvent)
        True
    """

    noise_multiplier: float
    discrete: bool = False
    dimension: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        scale = check_positive("noise_multiplier", self.noise_multiplier)
        object.__setattr__(self, "noise_multiplier", scale)
        if not isinstance(self.discrete, bool):
            raise InvalidArgumentError(
                f"discrete must be a bool, got {type(self.discrete).__name__}"
            )
        if self.dimension is not None:
            dimension = check_count("dimension", self.dimension)
            if dimension < 1:
                raise InvalidValueError(f"dimension must be >= 1, got {dimension!r}")
            object.__setattr__(self, "dimension", dimension)

    def _payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "noise_multiplier": self.noise_multiplier,
            "discrete": self.discrete,
        }
        if self.dimension is not None:
            payload["dimension"] = self.dimension
        return payload


@dataclass(frozen=True)
class GaussianEvent(NoiseEvent):
    """A Gaussian mechanism with noise multiplier σ/Δ.

    Args:
        noise_multiplier: σ/Δ > 0, the noise standard deviation over the L2
            sensitivity of the released vector.
        discrete: True for the discrete Gaussian on ℤ (Canonne, Kamath &
            Steinke 2020); it has at most the RDP of the continuous one.
        dimension: how many noisy values the vector has, or None when it is
            not public (e.g. groups chosen privately). The accountants do not
            need it (Δ is the whole vector's L2 sensitivity); it is recorded
            for audits and for analyses that depend on it, and takes no part
            in ``==`` or hashing.

    Raises:
        InvalidArgumentError: a field of the wrong type.
        InvalidBudgetError: a noise multiplier that is not a positive finite float.
        InvalidValueError: a dimension below 1.

    Example:
        >>> GaussianEvent(1.5, discrete=True, dimension=12)
        GaussianEvent(noise_multiplier=1.5, discrete=True, dimension=12)
    """

    TYPE: ClassVar[str] = "gaussian"


@dataclass(frozen=True)
class PoissonSampledEvent(Event):
    """``event`` run on a Poisson subsample: each unit kept independently with probability q.

    Args:
        sampling_probability: q in [0, 1].
        event: the event run on the subsample.

    Raises:
        InvalidArgumentError: ``event`` is not an event.
        InvalidBudgetError: q outside [0, 1].

    Example:
        >>> PoissonSampledEvent(0.01, GaussianEvent(1.1)).sampling_probability
        0.01
    """

    TYPE: ClassVar[str] = "poisson_sampled"
    sampling_probability: float
    event: Event

    def __post_init__(self) -> None:
        q = check_nonnegative("sampling_probability", self.sampling_probability)
        if q > 1:
            raise InvalidValueError(f"sampling_probability must be <= 1, got {q!r}")
        object.__setattr__(self, "sampling_probability", q)
        _check_event("event", self.event)

    def _payload(self) -> dict[str, Any]:
        return {"sampling_probability": self.sampling_probability, "event": self.event.to_dict()}


@dataclass(frozen=True)
class SelfComposedEvent(Event):
    """``event`` composed with itself ``count`` times.

    Args:
        event: the repeated event.
        count: how many times, an int >= 0.

    Raises:
        InvalidArgumentError: ``event`` is not an event or ``count`` not an int.
        InvalidValueError: a negative ``count``.

    Example:
        >>> SelfComposedEvent(GaussianEvent(1.0), 3).count
        3
    """

    TYPE: ClassVar[str] = "self_composed"
    event: Event
    count: int

    def __post_init__(self) -> None:
        _check_event("event", self.event)
        object.__setattr__(self, "count", check_count("count", self.count))

    def _payload(self) -> dict[str, Any]:
        return {"event": self.event.to_dict(), "count": self.count}


@dataclass(frozen=True)
class ComposedEvent(Event):
    """Several events in sequence, each possibly chosen after seeing earlier outputs.

    Args:
        events: an iterable of events (stored as a tuple).

    Raises:
        InvalidArgumentError: ``events`` is not an iterable of events.

    Example:
        >>> ComposedEvent([GaussianEvent(1.0), GaussianEvent(2.0)]).events[1]
        GaussianEvent(noise_multiplier=2.0, discrete=False, dimension=None)
    """

    TYPE: ClassVar[str] = "composed"
    events: tuple[Event, ...]

    def __post_init__(self) -> None:
        if isinstance(self.events, Event | str | bytes | Mapping) or not isinstance(
            self.events, Iterable
        ):
            raise InvalidArgumentError(
                f"events must be an iterable of events, got {type(self.events).__name__}"
            )
        events = tuple(self.events)
        for i, event in enumerate(events):
            _check_event(f"events[{i}]", event)
        object.__setattr__(self, "events", events)

    def _payload(self) -> dict[str, Any]:
        return {"events": [event.to_dict() for event in self.events]}


@dataclass(frozen=True)
class ThresholdEvent(Event):
    """Private partition selection: (ρ, δ)-approximate zCDP.

    Noisy per-group counts cost ``rho`` in zCDP; keeping only the groups that
    clear the threshold costs ``delta`` outright (Desfontaines, Voss, Gipson &
    Mandayam, PoPETs 2022; Wilkins, Kifer, Zhang & Karrer 2023).

    Args:
        rho: the zCDP cost ρ >= 0 of the noisy counts.
        delta: the δ spent outright, 0 <= δ < 1.

    Raises:
        InvalidArgumentError: a field that is not a real number.
        InvalidBudgetError: a negative ρ, or δ outside [0, 1).

    Example:
        >>> ThresholdEvent(rho=0.05, delta=1e-8)
        ThresholdEvent(rho=0.05, delta=1e-08)
    """

    TYPE: ClassVar[str] = "threshold"
    rho: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_nonnegative("rho", self.rho))
        object.__setattr__(self, "delta", check_delta(self.delta))

    def _payload(self) -> dict[str, Any]:
        return {"rho": self.rho, "delta": self.delta}


@dataclass(frozen=True)
class ZCDPEvent(Event):
    """A mechanism known only to be ρ-zCDP, e.g. privframe's exponential-mechanism quantiles.

    Its RDP curve is ρ·α at every order α (Bun & Steinke 2016, Def. 1.1).

    Args:
        rho: the zCDP cost ρ >= 0.

    Example:
        >>> ZCDPEvent(rho=0.1).to_dict()["type"]
        'zcdp'
    """

    TYPE: ClassVar[str] = "zcdp"
    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_nonnegative("rho", self.rho))

    def _payload(self) -> dict[str, Any]:
        return {"rho": self.rho}


@dataclass(frozen=True)
class LaplaceEvent(NoiseEvent):
    """A Laplace mechanism with noise multiplier b/Δ₁: ε-DP with ε = Δ₁/b.

    Releasing f(D) + Lap(b)^k, with Δ₁ the L1 sensitivity of the whole
    vector f, is (Δ₁/b)-DP (Dwork, McSherry, Nissim & Smith 2006; Dwork &
    Roth 2014, Thm. 3.6). The discrete Laplace on ℤ, P[X = x] ∝ e^{−|x|/b},
    gives the same ε for integer-valued f with integer Δ₁ (Canonne, Kamath &
    Steinke 2020, Sec. 2.2; Ghosh, Roughgarden & Sundararajan 2012).

    Args:
        noise_multiplier: b/Δ₁ > 0, the noise scale over the L1 sensitivity
            of the released vector.
        discrete: True for the discrete Laplace on ℤ.
        dimension: how many noisy values the vector has, or None when it is
            not public; recorded for audits, it takes no part in ``==`` or
            hashing (Δ₁ is the whole vector's).

    Raises:
        InvalidArgumentError: a field of the wrong type.
        InvalidBudgetError: a noise multiplier that is not a positive finite float.
        InvalidValueError: a dimension below 1.

    Example:
        >>> event = LaplaceEvent(2.0, discrete=True, dimension=3)
        >>> event.epsilon
        0.5
        >>> from_dict(event.to_dict()) == event
        True
    """

    TYPE: ClassVar[str] = "laplace"
    SINCE: ClassVar[int] = 3

    @property
    def epsilon(self) -> float:
        """ε = Δ₁/b = 1/``noise_multiplier``, rounded up (a guarantee).

        Example:
            >>> LaplaceEvent(3.0).epsilon > 1 / 3
            True
        """
        return round_up(1 / Fraction(self.noise_multiplier))


@dataclass(frozen=True)
class PureDPEvent(Event):
    """A mechanism known only to be ε-DP, e.g. the exponential mechanism (McSherry & Talwar 2007).

    Accountants bound it by the ε-DP randomized-response pair, which dominates
    every ε-DP mechanism (Kairouz, Oh & Viswanath 2015, proof of Thm. 3.3; see
    :mod:`privframe.accounting.pld`).

    Args:
        epsilon: ε >= 0.

    Raises:
        InvalidArgumentError: ``epsilon`` is not a real number.
        InvalidBudgetError: a negative or non-finite ε.

    Example:
        >>> PureDPEvent(epsilon=0.25)
        PureDPEvent(epsilon=0.25)
    """

    TYPE: ClassVar[str] = "pure_dp"
    SINCE: ClassVar[int] = 3
    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_nonnegative("epsilon", self.epsilon))

    def _payload(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon}


_TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls
    for cls in (
        GaussianEvent,
        PoissonSampledEvent,
        SelfComposedEvent,
        ComposedEvent,
        ThresholdEvent,
        ZCDPEvent,
        LaplaceEvent,
        PureDPEvent,
    )
}


def _field(data: Mapping[str, Any], name: str, where: str) -> Any:
    if name not in data:
        raise InvalidValueError(f"{where} event dict is missing the field {name!r}")
    return data[name]


def from_dict(data: Mapping[str, Any]) -> Event:
    """The event a dict written by :meth:`Event.to_dict` describes.

    Every level must carry a ``"version"`` from 1 to :data:`EVENT_FORMAT_VERSION`
    and a known ``"type"`` that exists in that version; unknown fields are
    refused, so a newer format is never silently half-read.

    Raises:
        InvalidArgumentError: ``data`` (or a nested event) is not a dict.
        InvalidValueError: an unknown type or version, or a missing or
            unexpected field; field values are validated as by the constructors.

    Example:
        >>> from_dict({"type": "gaussian", "version": 1, "noise_multiplier": 2.0})
        GaussianEvent(noise_multiplier=2.0, discrete=False, dimension=None)
    """
    if not isinstance(data, Mapping):
        raise InvalidArgumentError(f"an event dict must be a mapping, got {type(data).__name__}")
    version = data.get("version")
    if (
        isinstance(version, bool)
        or not isinstance(version, int)
        or not 1 <= version <= EVENT_FORMAT_VERSION
    ):
        raise InvalidValueError(
            f"event version must be 1 to {EVENT_FORMAT_VERSION}, got {version!r}; "
            "this privframe cannot read that event format"
        )
    if version == 1 and "dimension" in data:
        raise InvalidValueError("a version 1 event dict has no 'dimension' (it came in version 2)")
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in _TYPES:
        raise InvalidValueError(f"unknown event type {kind!r}; expected one of {sorted(_TYPES)}")
    cls = _TYPES[kind]
    if version < cls.SINCE:
        raise InvalidValueError(
            f"a version {version} event dict has no {kind!r} events (they came in version "
            f"{cls.SINCE})"
        )
    allowed = {
        GaussianEvent: {"noise_multiplier", "discrete", "dimension"},
        LaplaceEvent: {"noise_multiplier", "discrete", "dimension"},
        PureDPEvent: {"epsilon"},
        PoissonSampledEvent: {"sampling_probability", "event"},
        SelfComposedEvent: {"event", "count"},
        ComposedEvent: {"events"},
        ThresholdEvent: {"rho", "delta"},
        ZCDPEvent: {"rho"},
    }[cls]
    extra = set(data) - allowed - {"type", "version"}
    if extra:
        raise InvalidValueError(f"{kind} event dict has unexpected fields {sorted(extra)}")
    if cls is GaussianEvent:
        return GaussianEvent(
            _field(data, "noise_multiplier", kind),
            discrete=data.get("discrete", False),
            dimension=data.get("dimension"),
        )
    if cls is LaplaceEvent:
        return LaplaceEvent(
            _field(data, "noise_multiplier", kind),
            discrete=data.get("discrete", False),
            dimension=data.get("dimension"),
        )
    if cls is PureDPEvent:
        return PureDPEvent(_field(data, "epsilon", kind))
    if cls is PoissonSampledEvent:
        q = check_real("sampling_probability", _field(data, "sampling_probability", kind))
        return PoissonSampledEvent(q, from_dict(_field(data, "event", kind)))
    if cls is SelfComposedEvent:
        return SelfComposedEvent(
            from_dict(_field(data, "event", kind)), _field(data, "count", kind)
        )
    if cls is ComposedEvent:
        events = _field(data, "events", kind)
        if not isinstance(events, list | tuple):
            raise InvalidArgumentError(
                f"events must be a list of event dicts, got {type(events).__name__}"
            )
        return ComposedEvent(tuple(from_dict(e) for e in events))
    if cls is ZCDPEvent:
        return ZCDPEvent(_field(data, "rho", kind))
    return ThresholdEvent(_field(data, "rho", kind), _field(data, "delta", kind))


def from_json(text: str) -> Event:
    """The event a string written by :meth:`Event.to_json` describes (see :func:`from_dict`).

    Raises:
        InvalidValueError: the text is not JSON, or as for :func:`from_dict`.

    Example:
        >>> from_json('{"type": "threshold", "version": 1, "rho": 0.1, "delta": 1e-9}')
        ThresholdEvent(rho=0.1, delta=1e-09)
    """
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as err:
        raise InvalidValueError(f"event text is not valid JSON: {err}") from None
    return from_dict(data)
