"""What a ledger file records of the data it is spent on: public facts only, never values.

Example:
    >>> from privframe.accounting.ledger._identity import DataIdentity
    >>> DataIdentity("user", (("user", "Int64"),)).to_json()
    '{"columns":[["user","Int64"]],"privacy_unit":"user"}'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from privframe.accounting.ledger._format import canonical_json
from privframe.errors import InvalidArgumentError

__all__ = ["DataIdentity", "data_meta"]


@dataclass(frozen=True)
class DataIdentity:
    """What a ledger file records of the data it is spent on: public facts only.

    The privacy unit column and the input's columns with their types, as the
    session sees them after loading; never a data value. A ledger spent on
    one dataset must not be reopened for another: its spends would be carried
    over to (or credited to) the wrong data.

    Args:
        privacy_unit: the privacy unit column, or None (each row a person).
        columns: (name, type) pairs, in the data's order; types as strings
            (e.g. polars' ``str(dtype)``).

    Example:
        >>> from privframe.accounting.ledger import DataIdentity
        >>> old = DataIdentity("user", (("user", "Int64"), ("amount", "Float64")))
        >>> new = DataIdentity("user", (("user", "String"), ("amount", "Float64")))
        >>> new.differences(old)
        ["column 'user' has type String here but Int64 in the ledger"]
        >>> DataIdentity.from_json(old.to_json()) == old
        True
    """

    privacy_unit: str | None
    columns: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if self.privacy_unit is not None and not isinstance(self.privacy_unit, str):
            raise InvalidArgumentError(
                f"privacy_unit must be a str or None, got {type(self.privacy_unit).__name__}"
            )
        columns = tuple(tuple(c) for c in self.columns)
        if not all(
            len(c) == 2 and isinstance(c[0], str) and isinstance(c[1], str) for c in columns
        ):
            raise InvalidArgumentError("columns must be (name, type) pairs of strings")
        object.__setattr__(self, "columns", columns)

    @classmethod
    def of(cls, privacy_unit: str | None, schema: Mapping[str, object]) -> DataIdentity:
        """The identity of data with this unit and schema (a mapping of names to dtypes).

        Example:
            >>> import polars as pl
            >>> from privframe.accounting.ledger import DataIdentity
            >>> DataIdentity.of("u", pl.Schema({"u": pl.Int64})).columns
            (('u', 'Int64'),)
        """
        return cls(privacy_unit, tuple((str(name), str(t)) for name, t in schema.items()))

    def to_json(self) -> str:
        """Canonical JSON text, as stored in the ledger file.

        Example:
            >>> from privframe.accounting.ledger import DataIdentity
            >>> DataIdentity(None, (("x", "Float64"),)).to_json()
            '{"columns":[["x","Float64"]],"privacy_unit":null}'
        """
        return canonical_json(
            {"privacy_unit": self.privacy_unit, "columns": [list(c) for c in self.columns]}
        )

    @classmethod
    def from_json(cls, text: str) -> DataIdentity:
        """Inverse of :meth:`to_json`.

        Raises:
            ValueError: the text is not such JSON.

        Example:
            >>> from privframe.accounting.ledger import DataIdentity
            >>> DataIdentity.from_json('{"columns":[],"privacy_unit":"u"}').privacy_unit
            'u'
        """
        data = json.loads(text)
        if not isinstance(data, dict) or set(data) != {"privacy_unit", "columns"}:
            raise ValueError("not a data identity")
        try:
            return cls(data["privacy_unit"], tuple(tuple(c) for c in data["columns"]))
        except (InvalidArgumentError, TypeError) as err:
            raise ValueError(f"not a data identity ({err})") from None

    def differences(self, recorded: DataIdentity) -> list[str]:
        """How this data differs from the ``recorded`` one, one phrase per difference.

        Example:
            >>> from privframe.accounting.ledger import DataIdentity
            >>> DataIdentity("a", ()).differences(DataIdentity("b", ()))
            ["the privacy unit is 'a' here but 'b' in the ledger"]
        """
        found = []
        if self.privacy_unit != recorded.privacy_unit:
            found.append(
                f"the privacy unit is {self.privacy_unit!r} here but "
                f"{recorded.privacy_unit!r} in the ledger"
            )
        mine, theirs = dict(self.columns), dict(recorded.columns)
        added = [c for c in mine if c not in theirs]
        removed = [c for c in theirs if c not in mine]
        if added:
            found.append(f"columns {added} are not in the ledger's data")
        if removed:
            found.append(f"the ledger's data has columns {removed} that are not here")
        for name, kind in mine.items():
            if name in theirs and theirs[name] != kind:
                found.append(
                    f"column {name!r} has type {kind} here but {theirs[name]} in the ledger"
                )
        return found  # the columns' order does not matter: the data is the same


def data_meta(genesis: str, data: DataIdentity | None, text: str | None = None) -> dict[str, str]:
    """The meta rows recording ``data`` (or its JSON ``text``), with a hash bound to the file."""
    text = data.to_json() if data is not None else text
    if text is None:
        return {}
    digest = hashlib.sha256(bytes.fromhex(genesis) + b"data\x00" + text.encode()).hexdigest()
    return {"data": text, "data_hash": digest}
