"""Fast construction of frozen, slotted dataclasses: build a mutable twin, then switch class.

Owns ``mutable_twin`` (the protocol decoders build every struct this way) and
``fast_constructor`` (a keyword constructor built on it, for code that makes one frozen
value per partition of a request). Imports nothing from josefk.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, cast

_T = TypeVar("_T")


def mutable_twin(cls: Any) -> Any:
    """A private mutable twin of the frozen, slotted dataclass ``cls``.

    Same ``__slots__`` in the same order on the same base, so the two classes have identical
    instance layouts and CPython allows ``obj.__class__ = cls`` on a twin instance. A twin
    instance filled with plain attribute stores (which CPython specialises to direct slot
    writes) and then turned into ``cls`` is an ordinary instance of ``cls`` (``type()``,
    equality, hashing, pickling and frozen-ness unchanged), for about a third of the cost of
    one slot-descriptor ``__set__`` call per field.
    """
    twin = type(
        f"_{cls.__name__}Builder",
        (),
        {"__slots__": cls.__slots__, "__module__": cls.__module__},
    )
    twin.__qualname__ = f"{cls.__qualname__}.<builder>"
    # Fail now, at class build time, if a future dataclasses changes the layout.
    probe = twin()
    probe.__class__ = cls
    return twin


def fast_constructor(cls: type[_T]) -> Callable[..., _T]:
    """A keyword-only constructor for the frozen, slotted dataclass ``cls`` that builds
    through its mutable twin: the same instance as ``cls(...)`` with the same defaults
    (factories called per instance), without the frozen ``__init__``'s
    ``object.__setattr__`` per field. ``__post_init__`` is not run: only for classes without
    one."""
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__qualname__} has a __post_init__")
    twin = mutable_twin(cls)
    ns: dict[str, Any] = {"_Twin": twin, "_cls": cls, "_MISSING": dataclasses.MISSING}
    params, body = [], ["    o = _Twin()"]
    for f in dataclasses.fields(cast(Any, cls)):
        if f.default is not dataclasses.MISSING:
            ns[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
            body.append(f"    o.{f.name} = {f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            ns[f"_f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            body.append(f"    o.{f.name} = _f_{f.name}() if {f.name} is _MISSING else {f.name}")
        else:
            params.append(f.name)
            body.append(f"    o.{f.name} = {f.name}")
    body += ["    o.__class__ = _cls", "    return o"]
    exec(f"def make(*, {', '.join(params)}):\n" + "\n".join(body), ns)
    make: Callable[..., _T] = ns["make"]
    make.__qualname__ = f"fast_constructor({cls.__qualname__})"
    return make
