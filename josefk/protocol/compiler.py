"""Turns message declarations into classes and straight-line codecs.

Owns the compilation of a ``josefk.protocol.schema.MessageSpec``:

* **Classes.** One frozen, slotted, keyword-only dataclass per message and per nested struct,
  generated as source and exec'd once per message. The message class is named after the spec
  (``ProduceRequest``); each struct class is named after its struct (``TopicProduceData``),
  with ``__qualname__`` ``ProduceRequest.TopicProduceData``, and is reachable as an attribute
  of the message class (``ProduceRequest.TopicProduceData``) and of its parent struct. A struct
  declared identically in two places (one of Kafka's common structs) is one class, nested where
  it is first declared; if two different structs of one message share a name, the later one is
  reachable only through its parent. Every field has a default (its declared default, else the zero value of its type:
  0, False, "", b"", [], a default instance for structs, None for records), so any subset of
  fields may be given.
* **Codecs.** One decoder and one encoder per (message, version), generated as straight-line
  Python on first use and cached: consecutive fixed-size fields are read and written with one
  precompiled ``struct.Struct``; strings, arrays and tagged fields are inlined; nested structs
  get their own generated function per version. Nothing looks at the declaration at run time.
  Decoders read a fixed run together with the length prefix after it, take short paths for
  one- and two-byte compact lengths and small int arrays (the general code handles the rest;
  ``plain_decoder`` generates it alone, for differential tests), and build each struct as a
  private mutable twin of its class that then becomes an instance of the frozen class
  (``_builder_class``).

Decoding takes a memoryview and returns the object; ``records`` fields come back as
memoryview slices of the input (zero copy). Bad bytes raise only ``ProtocolDecodeError``
subclasses; claimed lengths are checked against the bytes left before anything is allocated.

Encoding appends to a bytearray. ``encode_parts`` instead returns the encoded bytes split
around ``records`` values, which are passed through untouched, so a caller can hand the
broker's file slices (any object with ``__len__``) to ``sendfile`` while the rest of the
response is written from memory.

Decoders have two paths. When the optional C extension ``josefk.protocol._cdecode`` is built
(setup.py) and ``JOSEFK_PURE_PYTHON`` is not ``1``, ``decoder`` returns a ``_cdecode.Plan``:
a description of each struct of the version (its class; per field in wire order a kind,
nullability and child struct; tagged fields; defaults), built once here from the same
classification the generator uses and walked in C. Otherwise it returns the generated Python
decoder. ``python_decoder`` and ``c_decoder`` give either path explicitly (for tests).

**Stubs.** ``render_stubs`` writes the classes' types as ``.pyi`` source (each message class,
its structs nested as at run time, fields with their types and the versions they exist in);
``python -m josefk.protocol.stubgen`` keeps josefk/protocol/message_types.pyi current, so that
code annotated with ``ProduceRequest`` has its field access checked by mypy.

Imports josefk.protocol.schema, .types and .errors (and the optional ._cdecode) only; no I/O.
"""

from __future__ import annotations

import importlib
import itertools
import keyword
import linecache
import os
import struct
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, Final

from josefk.protocol import types as t
from josefk.protocol.errors import (
    BufferUnderflow,
    InvalidLength,
    InvalidString,
    InvalidVarint,
    MalformedData,
    ProtocolDecodeError,
    ProtocolEncodeError,
    UnexpectedNull,
    UnsupportedVersion,
)
from josefk.protocol.schema import MISSING, Field, MessageSpec
from josefk.util.frozen import fast_constructor as fast_constructor
from josefk.util.frozen import mutable_twin as _builder_class

Decoder = Callable[[memoryview, int], tuple[Any, int]]


def _load_cdecode() -> Any:
    """The C decoder extension, initialised with the codec's error classes, or None when it
    was not built (no compiler at install time)."""
    try:
        module = importlib.import_module("josefk.protocol._cdecode")
    except ImportError:
        return None
    module.init(
        BufferUnderflow,
        InvalidLength,
        UnexpectedNull,
        InvalidVarint,
        InvalidString,
        MalformedData,
        uuid.UUID,
    )
    return module


_cdecode: Any = _load_cdecode()
#: Whether the extension is built (``CompiledMessage.c_decoder`` works).
C_DECODER_AVAILABLE: Final = _cdecode is not None
#: Whether decoding uses it by default; ``JOSEFK_PURE_PYTHON=1`` keeps the generated Python.
C_DECODER: Final = C_DECODER_AVAILABLE and os.environ.get("JOSEFK_PURE_PYTHON", "") != "1"
Encoder = Callable[[bytearray, Any, "list[tuple[int, Any]] | None"], None]

_PY_TYPES: Final = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "uint32": "int",
    "int64": "int",
    "float64": "float",
    "string": "str",
    "bytes": "bytes",
    "records": "bytes | bytearray | memoryview | None",
    "uuid": "uuid.UUID",
}

_ZERO: Final[dict[str, Any]] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "uint16": 0,
    "int32": 0,
    "uint32": 0,
    "int64": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": None,
    "uuid": t.ZERO_UUID,
}

_INT_TYPES: Final = frozenset({"int8", "int16", "uint16", "int32", "uint32", "int64"})


def _coerce_default(f: Field, value: Any) -> Any:
    """Declared defaults may be written as Kafka's JSON writes them ("-1", "null", "true")."""
    if value is None:
        return None
    if isinstance(value, str) and not f.is_array:
        kind = f.type
        if value == "null" and kind != "string":
            return None
        if kind in _INT_TYPES:
            return int(value, 0)
        if kind == "bool":
            return value.strip().lower() == "true"
        if kind == "float64":
            return float(value)
        if kind == "uuid":
            return uuid.UUID(value) if value else t.ZERO_UUID
        if kind in ("bytes", "records"):
            return value.encode()
    if f.type == "uuid" and isinstance(value, bytes | bytearray):
        return uuid.UUID(bytes=bytes(value))
    return value


@dataclass(slots=True)
class _StructInfo:
    """One struct (or the message itself) and the class generated for it."""

    name: str
    qualname: str
    fields: tuple[Field, ...]
    parent: _StructInfo | None
    index: int
    cls: Any = None
    builder: Any = None
    children: list[tuple[Field, _StructInfo]] = dc_field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _ReadAhead:
    """Bytes a fixed run's Struct read past its own fields (see the decoder conventions):
    ``names`` are the locals holding them, ``skip`` the run's size, not yet added to the
    position."""

    skip: int
    names: tuple[str, ...]


class CompiledMessage:
    """The class and the per-version codecs of one request or response.

    Thread-safe: codecs are generated under a lock the first time a version is used.
    """

    def __init__(self, spec: MessageSpec) -> None:
        self.spec = spec
        self.api_key = spec.api_key
        self.name = spec.class_name
        self._structs: list[_StructInfo] = []
        self._by_field: dict[int, _StructInfo] = {}
        # The first struct of each name, for identical redeclarations to share its class.
        self._shared: dict[str, _StructInfo] = {}
        self._lock = threading.Lock()
        # The decoders decode_from uses (C plans or generated Python), and the generated
        # Python ones themselves.
        self._decoders: dict[int, Decoder] = {}
        self._py_decoders: dict[int, Decoder] = {}
        self._encoders: dict[int, Encoder] = {}
        self._sources: dict[int, str] = {}
        self._plans: dict[int, Decoder] = {}
        root = _StructInfo(spec.class_name, spec.class_name, spec.fields, None, 0)
        self._structs.append(root)
        self._collect(root)
        self._build_classes()
        self.cls: Any = root.cls
        self._root = root
        # Lets entry points find the codec from an instance (encode_response(body=...)).
        root.cls.API_KEY = spec.api_key
        root.cls.KIND = spec.kind
        root.cls.COMPILED = self

    # -- declarations -> classes -------------------------------------------------------------

    def _collect(self, info: _StructInfo) -> None:
        seen: set[str] = set()
        for f in info.fields:
            if f.name in seen:
                raise ValueError(f"{info.qualname}: field {f.name!r} declared twice")
            if not f.name.isidentifier() or keyword.iskeyword(f.name):
                raise ValueError(f"{info.qualname}: {f.name!r} is not a valid field name")
            seen.add(f.name)
            if f.is_struct:
                name = f.struct_name
                assert name is not None
                shared = self._shared.get(name)
                if shared is not None and shared.fields == f.fields:
                    # The same struct declared in two places (one of Kafka's common structs,
                    # e.g. AddPartitionsToTxn's topics before and after v4): one class.
                    self._by_field[id(f)] = shared
                    continue
                child = _StructInfo(
                    name, f"{info.qualname}.{name}", f.fields, info, len(self._structs)
                )
                self._structs.append(child)
                self._shared.setdefault(name, child)
                self._by_field[id(f)] = child
                info.children.append((f, child))
                self._collect(child)

    def _annotation(self, f: Field, struct_name: str | None = None) -> str:
        """The field's type as Python source; ``struct_name`` names a struct field's class
        where its own name is not bound (in the stubs)."""
        if f.is_struct:
            base = struct_name or self._by_field[id(f)].name
        else:
            base = _PY_TYPES[f.element_type]
        if f.is_array:
            base = f"list[{base}]"
        nv = f.nullable_versions
        nullable = nv.high is None or nv.low <= nv.high
        if nullable and f.type != "records":
            base = f"{base} | None"
        return base

    def _default_of(self, f: Field) -> tuple[str, Any]:
        """("value", v) or ("factory", callable) for a field's default."""
        if f.default is not MISSING:
            value = _coerce_default(f, f.default)
            if value is None:
                return ("value", None)
            if f.is_array:
                return ("factory", lambda v=tuple(value): list(v))
            if f.is_struct:
                return ("value", value)
            return ("value", value)
        if f.is_array:
            return ("factory", list)
        if f.is_struct:
            return ("factory", self._by_field[id(f)].cls)
        return ("value", _ZERO[f.type])

    def _build_classes(self) -> None:
        # Children first so a parent's default factory can reference its child's class.
        for info in sorted(self._structs, key=lambda s: -s.qualname.count(".")):
            ns: dict[str, Any] = {
                "dataclass": dataclass,
                "dc_field": dc_field,
                "uuid": uuid,
            }
            lines = [
                "@dataclass(frozen=True, slots=True, kw_only=True)",
                f"class {info.name}:",
                f'    """{info.qualname} of Kafka API {self.api_key}."""',
            ]
            for f in info.fields:
                kind, value = self._default_of(f)
                ns[f"_d_{f.name}"] = value
                if kind == "factory":
                    rhs = f"dc_field(default_factory=_d_{f.name})"
                else:
                    rhs = f"_d_{f.name}"
                lines.append(f"    {f.name}: {self._annotation(f)!r} = {rhs}")
            exec("\n".join(lines), ns)
            cls = ns[info.name]
            cls.__qualname__ = info.qualname
            cls.__module__ = "josefk.protocol.messages"
            info.cls = cls
            info.builder = _builder_class(cls)
        root = self._structs[0]
        attached: set[str] = set()
        for info in self._structs[1:]:
            assert info.parent is not None
            if not hasattr(info.parent.cls, info.name):
                setattr(info.parent.cls, info.name, info.cls)
            if info.name not in attached and not hasattr(root.cls, info.name):
                setattr(root.cls, info.name, info.cls)
                attached.add(info.name)

    # -- declarations -> type stubs ----------------------------------------------------------

    def stub_lines(self) -> list[str]:
        """This message's classes as ``.pyi`` source (see ``render_stubs``).

        Mirrors what ``_build_classes`` attaches: each struct class nested in its parent's,
        and on the message class an alias for every struct reachable as its attribute. A
        struct whose name its parent already binds to another struct (reachable at run time
        only as a field's value) gets a private stub-only name.
        """
        root = self._structs[0]
        bound: dict[int, dict[str, _StructInfo]] = {info.index: {} for info in self._structs}
        for info in self._structs[1:]:
            assert info.parent is not None
            bound[info.parent.index].setdefault(info.name, info)
            bound[root.index].setdefault(info.name, info)
        stub_name: dict[int, str] = {}
        for info in self._structs[1:]:
            assert info.parent is not None
            own = bound[info.parent.index][info.name] is info
            stub_name[info.index] = info.name if own else f"_{info.name}_{info.index}"

        def path(info: _StructInfo) -> str:
            steps = []
            node: _StructInfo | None = info
            while node is not None and node is not root:
                steps.append(stub_name[node.index])
                node = node.parent
            return ".".join(reversed(steps))

        spec = self.spec
        out: list[str] = []

        def emit(info: _StructInfo, indent: str) -> None:
            name = stub_name.get(info.index, info.name)
            out.append(f"{indent}@dataclass(frozen=True, slots=True, kw_only=True)")
            out.append(f"{indent}class {name}:")
            inner = indent + "    "
            if info is root:
                flexible = f", flexible {spec.flexible_versions}"
                out.append(
                    f'{inner}"""{spec.name} {spec.kind} (API key {spec.api_key}), '
                    f'versions {spec.valid_versions}{flexible}."""'
                )
                out.append("")
                out.append(f"{inner}API_KEY: ClassVar[int]")
                out.append(f"{inner}KIND: ClassVar[str]")
                out.append(f"{inner}COMPILED: ClassVar[CompiledMessage]")
            else:
                out.append(f'{inner}"""{info.qualname}."""')
            out.append("")
            for _, child in info.children:
                emit(child, inner)
            for alias, target in bound[info.index].items():
                if target.parent is not info:
                    # An explicit alias, so that ``ProduceRequest.PartitionProduceData`` is a
                    # type in annotations too. mypy warns that a dataclass would take an
                    # annotated name for a field; at run time it is a plain class attribute.
                    out.append(f"{inner}{alias}: TypeAlias = {path(target)}  # type: ignore[misc]")
            for f in info.fields:
                child_name = None
                if f.is_struct:
                    target = self._by_field[id(f)]
                    # A shared struct declared under another parent: named from the top.
                    own = target.parent is info
                    child_name = stub_name[target.index] if own else f"{root.name}.{path(target)}"
                out.append(
                    f"{inner}{f.name}: {self._annotation(f, child_name)} = ...  "
                    f"# {_versions_note(f)}"
                )
            out.append("")

        emit(root, "")
        return out

    def struct_classes(self) -> dict[str, Any]:
        """Qualified name -> class, for every struct of this message."""
        return {info.qualname: info.cls for info in self._structs}

    def struct_info_for(self, f: Field) -> tuple[Any, tuple[Field, ...]]:
        """The class and fields of a struct-typed field (for value generators in tests)."""
        info = self._by_field[id(f)]
        return info.cls, info.fields

    # -- codecs ------------------------------------------------------------------------------

    def check_version(self, version: int) -> None:
        if not self.spec.valid_versions.contains(version):
            raise UnsupportedVersion(self.api_key, version)

    def _compile(self, version: int) -> None:
        with self._lock:
            if version in self._py_decoders:
                return
            self.check_version(version)
            gen = _Generator(self, version)
            source, ns = gen.generate()
            # A real file name with the source in linecache: tracebacks through generated
            # code show its lines (and tools that read frame sources do not trip on it).
            filename = f"<josefk.protocol {self.name} v{version}>"
            linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
            exec(compile(source, filename, "exec"), ns)
            self._sources[version] = source
            self._encoders[version] = ns[gen.encoder_name(self._structs[0])]
            self._py_decoders[version] = ns[gen.decoder_name(self._structs[0])]

    def source(self, version: int) -> str:
        """The generated codec source for ``version`` (for debugging and curiosity)."""
        if version not in self._sources:
            self._compile(version)
        return self._sources[version]

    def decoder(self, version: int) -> Decoder:
        """The decoder ``decode_from`` uses: the C plan when the extension is in use
        (``C_DECODER``), else the generated Python decoder."""
        fn = self._decoders.get(version)
        if fn is None:
            fn = self.c_decoder(version) if C_DECODER else self.python_decoder(version)
            self._decoders[version] = fn
        return fn

    def python_decoder(self, version: int) -> Decoder:
        """The generated Python decoder for ``version``, whichever path is the default."""
        fn = self._py_decoders.get(version)
        if fn is None:
            self._compile(version)
            fn = self._py_decoders[version]
        return fn

    def c_decoder(self, version: int) -> Decoder:
        """The C decoder for ``version`` (a ``_cdecode.Plan``, called like a generated
        decoder), whichever path is the default. Raises RuntimeError when the extension is
        not built; cached."""
        if _cdecode is None:
            raise RuntimeError("josefk.protocol._cdecode is not available")
        with self._lock:
            plan = self._plans.get(version)
            if plan is None:
                self.check_version(version)
                gen = _Generator(self, version, shortcuts=False)
                plan = _cdecode.Plan(_plan_struct(gen, self._root), gen.flexible)
                self._plans[version] = plan
        return plan

    def encoder(self, version: int) -> Encoder:
        fn = self._encoders.get(version)
        if fn is None:
            self._compile(version)
            fn = self._encoders[version]
        return fn

    def decode_from(self, buf: memoryview, pos: int, version: int) -> tuple[Any, int]:
        """Decode one message starting at ``pos``; returns it and the position after it."""
        fn = self._decoders.get(version) or self.decoder(version)
        try:
            return fn(buf, pos)
        except ProtocolDecodeError:
            raise
        except Exception as exc:  # noqa: BLE001  re-raised as the codec's ProtocolDecodeError
            raise translate_decode_error(exc) from None

    def decode(self, data: bytes | bytearray | memoryview, version: int) -> Any:
        """Decode a whole message body (trailing bytes are ignored, as Kafka does)."""
        return self.decode_from(as_byte_view(data), 0, version)[0]

    def encode_into(self, out: bytearray, obj: Any, version: int) -> None:
        """Append the encoding of ``obj`` to ``out`` (records copied in)."""
        fn = self._encoders.get(version) or self.encoder(version)
        try:
            fn(out, obj, None)
        except ProtocolEncodeError:
            raise
        except (struct.error, TypeError, AttributeError, ValueError, OverflowError) as exc:
            raise ProtocolEncodeError(f"cannot encode {self.name} v{version}: {exc}") from None

    def encode(self, obj: Any, version: int) -> bytes:
        out = bytearray()
        self.encode_into(out, obj, version)
        return bytes(out)

    def encode_parts_into(self, out: bytearray, obj: Any, version: int) -> list[tuple[int, Any]]:
        """Append ``obj`` to ``out`` leaving records out; returns (position in out, records).

        Each records value belongs at the given position of ``out`` (after its length prefix,
        which is in ``out``); ``split_parts`` turns the result into the list to write.
        """
        fn = self._encoders.get(version) or self.encoder(version)
        external: list[tuple[int, Any]] = []
        try:
            fn(out, obj, external)
        except ProtocolEncodeError:
            raise
        except (struct.error, TypeError, AttributeError, ValueError, OverflowError) as exc:
            raise ProtocolEncodeError(f"cannot encode {self.name} v{version}: {exc}") from None
        return external

    def plain_decoder(self, version: int) -> Decoder:
        """A decoder for ``version`` generated without read-ahead and fast paths: only the
        general code. Slower; for differential tests of the real decoder. Not cached."""
        self.check_version(version)
        gen = _Generator(self, version, shortcuts=False)
        source, ns = gen.generate()
        exec(compile(source, f"<josefk.protocol {self.name} v{version} plain>", "exec"), ns)
        decoder: Decoder = ns[gen.decoder_name(self._structs[0])]
        return decoder

    def encode_parts(self, obj: Any, version: int) -> list[Any]:
        """The encoding as a list of buffers: memoryviews of encoded bytes, and each
        non-empty records value as given (bytes, memoryview, or a file slice object)."""
        out = bytearray()
        external = self.encode_parts_into(out, obj, version)
        return split_parts(out, external)


def split_parts(out: bytearray, external: list[tuple[int, Any]]) -> list[Any]:
    """Interleave slices of ``out`` with the records values recorded by the encoder."""
    if not external:
        return [memoryview(out)]
    view = memoryview(out)
    parts: list[Any] = []
    start = 0
    for position, records in external:
        if position > start:
            parts.append(view[start:position])
        if len(records):
            parts.append(records)
        start = position
    if start < len(out):
        parts.append(view[start:])
    return parts


def as_byte_view(data: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def translate_decode_error(exc: BaseException) -> ProtocolDecodeError:
    """Map what Python raises on bad bytes to the codec's own error types."""
    if isinstance(exc, ProtocolDecodeError):
        return exc
    if isinstance(exc, IndexError | struct.error):
        return BufferUnderflow(f"input ended early ({exc})")
    if isinstance(exc, UnicodeDecodeError):
        return InvalidString(str(exc))
    if isinstance(exc, MemoryError):
        return InvalidLength("length too large")
    return MalformedData(f"{type(exc).__name__}: {exc}")


# -- code generation ---------------------------------------------------------------------------


class _Generator:
    """Writes the source of one version's decoders and encoders for all structs."""

    def __init__(self, message: CompiledMessage, version: int, *, shortcuts: bool = True) -> None:
        self.message = message
        self.version = version
        self.flexible = message.spec.flexible_versions.contains(version)
        # Off: decoders without read-ahead and fast paths (see plain_decoder).
        self.shortcuts = shortcuts
        self.ns: dict[str, Any] = {
            "_BU": BufferUnderflow,
            "_IL": InvalidLength,
            "_UN": UnexpectedNull,
            "_MD": MalformedData,
            "_EE": ProtocolEncodeError,
            "_ruv": t.read_uvarint,
            "_uvb": t.uvarint_bytes,
            "_I16": t.INT16,
            "_I32": t.INT32,
            "_I8": t.INT8,
            "_I8u": t.INT8.unpack_from,
            "_I16u": t.INT16.unpack_from,
            "_I32u": t.INT32.unpack_from,
            "_UUID": uuid.UUID,
            "_unpack_from": struct.unpack_from,
            "_pack": struct.pack,
            "_read_string": t.read_string,
            "_read_bytes": t.read_bytes,
            "_write_string": t.write_string,
            "_write_bytes": t.write_bytes,
        }
        self._structs: dict[str, str] = {}
        self._counter = itertools.count()
        self._min_sizes: dict[int, int] = {}
        # Whether the bytes after a compact length prefix are sure to include one more byte
        # (see the decoder conventions below); off while generating a tagged field's value.
        self._tail_safe = True

    def decoder_name(self, info: _StructInfo) -> str:
        return f"_dec_{info.index}"

    def encoder_name(self, info: _StructInfo) -> str:
        return f"_enc_{info.index}"

    def _struct(self, fmt: str) -> str:
        name = self._structs.get(fmt)
        if name is None:
            name = f"_S{len(self._structs)}"
            self._structs[fmt] = name
            self.ns[name] = struct.Struct(">" + fmt)
        return name

    def _const(self, value: Any) -> str:
        name = f"_K{next(self._counter)}"
        self.ns[name] = value
        return name

    def _var(self, stem: str) -> str:
        return f"{stem}{next(self._counter)}"

    # Field classification for this version.

    def _is_tagged(self, f: Field) -> bool:
        return f.tag is not None and self.flexible and f.tagged_versions.contains(self.version)

    def _regular(self, fields: tuple[Field, ...]) -> list[Field]:
        return [f for f in fields if f.versions.contains(self.version) and not self._is_tagged(f)]

    def _tagged(self, fields: tuple[Field, ...]) -> list[Field]:
        return sorted((f for f in fields if self._is_tagged(f)), key=lambda f: f.tag or 0)

    def _nullable(self, f: Field) -> bool:
        return f.nullable_versions.contains(self.version)

    def _fixed(self, f: Field) -> tuple[str, int] | None:
        if f.is_array or f.is_struct:
            return None
        return t.FIXED_FORMATS.get(f.type)

    def _fixed_of(self, f: Field) -> tuple[str, int]:
        fixed = self._fixed(f)
        assert fixed is not None
        return fixed

    def min_size(self, info: _StructInfo) -> int:
        """The fewest bytes one encoded instance of ``info`` can take in this version."""
        cached = self._min_sizes.get(info.index)
        if cached is not None:
            return cached
        size = 1 if self.flexible else 0
        for f in self._regular(info.fields):
            fixed = self._fixed(f)
            if fixed is not None:
                size += fixed[1]
            elif f.is_array:
                size += 1 if self.flexible else 4
            elif f.is_struct:
                if self._nullable(f):
                    size += 1
                else:
                    size += self.min_size(self.message._by_field[id(f)])
            elif f.type == "string":
                size += 1 if self.flexible else 2
            else:
                size += 1 if self.flexible else 4
        self._min_sizes[info.index] = size
        return size

    def generate(self) -> tuple[str, dict[str, Any]]:
        chunks: list[str] = []
        for info in self.message._structs:
            chunks.append(self._decoder(info))
            chunks.append(self._encoder(info))
        return "\n\n".join(chunks), self.ns

    # -- shared helpers ----------------------------------------------------------------------

    def _child(self, f: Field) -> _StructInfo:
        return self.message._by_field[id(f)]

    def _default_expr(self, f: Field) -> str:
        """An expression giving a fresh default value for ``f``."""
        kind, value = self.message._default_of(f)
        if kind == "factory":
            if value is list:
                return "[]"
            if f.is_struct and not f.is_array:
                child = self._child(f)
                if all(not g.is_array and not g.is_struct for g in child.fields):
                    # Frozen and holding no lists: one shared default instance is safe.
                    return self._const(value())
            return f"{self._const(value)}()"
        if value is None or type(value) in (bool, int):
            return repr(value)
        return self._const(value)

    def _array_struct(self, code: str) -> str:
        """Name of a tuple of precompiled Structs for 0..31 elements of ``code``."""
        key = f"_ARR_{code}"
        if key not in self.ns:
            self.ns[key] = tuple(struct.Struct(f">{n}{code}") for n in range(32))
        return key

    # -- decoders ----------------------------------------------------------------------------
    #
    # Conventions of the generated decoders. ``b`` is the memoryview, ``p`` the position, ``e``
    # its end. A run of fixed-size fields is read with one bound ``Struct.unpack_from`` and
    # that same call also reads ahead what follows when its size is known to be there:
    #
    # * before a length prefix, its first byte (flexible versions; a varint has at least one)
    #   or the whole int16/int32 length (older versions); in flexible versions also a second
    #   byte, because a compact length is always followed by something (the enclosing struct
    #   ends with its tagged-field count) -- except inside a tagged field's value, whose
    #   sub-buffer may end right after it, so there ``_tail_safe`` is off;
    # * at the end of a flexible struct, the tagged-field count byte, almost always 0.
    #
    # The bytes read ahead are passed on as ``pre`` (names of locals) to the code for the
    # next field, which then does not touch the buffer for them; ``p`` still points at the
    # length prefix. A short buffer makes ``unpack_from`` raise struct.error, which
    # ``decode_from`` turns into BufferUnderflow, so no separate bounds check is needed for
    # what a Struct reads.

    def _decoder(self, info: _StructInfo) -> str:
        lines = [f"def {self.decoder_name(info)}(buf, pos):", "    end = len(buf)"]
        body: list[str] = []
        self._decode_struct(body, info, "obj", "buf", "pos", "end")
        lines.extend("    " + line for line in body)
        lines.append("    return obj, pos")
        return "\n".join(lines)

    def _unpacker(self, fmt: str) -> str:
        """Name of the bound ``unpack_from`` of a precompiled Struct for ``fmt``."""
        name = f"{self._struct(fmt)}u"
        if name not in self.ns:
            self.ns[name] = self.ns[name[:-1]].unpack_from
        return name

    def _array_unpackers(self, code: str) -> str:
        """Name of a tuple of bound ``unpack_from`` for 0..31 elements of ``code``."""
        key = f"_AU_{code}"
        if key not in self.ns:
            self.ns[key] = tuple(struct.Struct(f">{n}{code}").unpack_from for n in range(32))
        return key

    def _skipping_unpackers(self, code: str) -> str:
        """Name of a tuple of bound ``unpack_from``: entry c (1..32) skips one byte and reads
        c - 1 elements of ``code`` (entry 0 is unused)."""
        key = f"_AX_{code}"
        if key not in self.ns:
            self.ns[key] = (
                None,
                *(struct.Struct(f">x{c - 1}{code}").unpack_from for c in range(1, 33)),
            )
        return key

    def _length_prefixed(self, f: Field) -> bool:
        return f.is_array or (not f.is_struct and self._fixed(f) is None)

    def _read_ahead(self, following: Field | None) -> str:
        """Struct format of what may be read along with a fixed run followed by ``following``
        (None: the end of the struct)."""
        if not self.shortcuts:
            return ""
        if self.flexible:
            if following is None:
                return "B"
            if following.is_array:
                return "B"  # the fast path for arrays needs one byte (a count under 32)
            if self._length_prefixed(following):
                return "BB" if self._tail_safe else "B"
            return ""
        if following is not None and self._length_prefixed(following):
            return "h" if following.type == "string" and not following.is_array else "i"
        return ""

    def _decode_struct(
        self, out: list[str], info: _StructInfo, target: str, b: str, p: str, e: str
    ) -> None:
        """Statements decoding one ``info`` struct inline into ``target``."""
        prefix = f"v{info.index}_"
        regular = self._regular(info.fields)
        pre: _ReadAhead | None = None
        i = 0
        while i < len(regular):
            f = regular[i]
            if self._fixed(f) is not None:
                group = [f]
                while i + 1 < len(regular) and self._fixed(regular[i + 1]) is not None:
                    i += 1
                    group.append(regular[i])
                following = regular[i + 1] if i + 1 < len(regular) else None
                ahead = self._read_ahead(following)
                fmt = "".join(self._fixed_of(g)[0] for g in group)
                size = sum(self._fixed_of(g)[1] for g in group)
                unpack = self._unpacker(fmt + ahead)
                names = [f"{prefix}{g.name}" for g in group]
                ahead_vars = [self._var("x") for _ in ahead]
                if len(names) == 1 and not ahead_vars:
                    out.append(f"{names[0]} = {unpack}({b}, {p})[0]")
                else:
                    out.append(f"{', '.join(names + ahead_vars)} = {unpack}({b}, {p})")
                for g in group:
                    if g.type == "uuid":
                        out.append(f"{prefix}{g.name} = _UUID(bytes={prefix}{g.name})")
                if ahead_vars:
                    # ``p`` moves past the fixed run together with the length prefix.
                    pre = _ReadAhead(size, tuple(ahead_vars))
                else:
                    out.append(f"{p} += {size}")
            else:
                self._decode_field(out, f, f"{prefix}{f.name}", b, p, e, pre)
                pre = None
            i += 1
        tagged = self._tagged(info.fields)
        if self.flexible:
            for f in tagged:
                out.append(f"{prefix}{f.name} = {self._default_expr(f)}")
            self._decode_tagged_section(out, tagged, prefix, b, p, e, pre)
        builder, cls = f"_T{info.index}", f"_C{info.index}"
        self.ns[builder] = info.builder
        self.ns[cls] = info.cls
        # Plain slot stores on the mutable twin, then the class switch (see _builder_class).
        out.append(f"{target} = {builder}()")
        present = {f.name for f in regular} | {f.name for f in tagged}
        for f in info.fields:
            value = f"{prefix}{f.name}" if f.name in present else self._default_expr(f)
            out.append(f"{target}.{f.name} = {value}")
        out.append(f"{target}.__class__ = {cls}")

    def _length(
        self, out: list[str], var: str, b: str, p: str, wide: bool, pre: _ReadAhead | None
    ) -> None:
        """Read a length prefix into ``var`` (-1 for null, compact lengths already adjusted)."""
        skip = pre.skip if pre is not None else 0
        if not self.flexible:
            size = 4 if wide else 2
            if pre is not None:
                out.append(f"{var} = {pre.names[0]}")
            else:
                out.append(f"{var} = {'_I32' if wide else '_I16'}u({b}, {p})[0]")
            out.append(f"{p} += {skip + size}")
            return
        if pre is None:
            first = self._var("b")
            out.append(f"{first} = {b}[{p}]")
        else:
            first = pre.names[0]
        out.append(f"if {first} < 0x80:")
        out.append(f"    {var} = {first} - 1")
        out.append(f"    {p} += {skip + 1}")
        if pre is not None and len(pre.names) > 1:
            second = pre.names[1]
            out.append(f"elif {second} < 0x80:")
        else:
            second = self._var("lo")
            out.append(f"elif ({second} := {b}[{p} + {skip + 1}]) < 0x80:")
        out.append(f"    {var} = (({first} & 0x7F) | ({second} << 7)) - 1")
        out.append(f"    {p} += {skip + 2}")
        out.append("else:")
        out.append(f"    {var}, {p} = _ruv({b}, {p + ' + ' + str(skip) if skip else p})")
        out.append(f"    {var} -= 1")

    def _null_check(self, out: list[str], n: str, target: str, nullable: bool, what: str) -> None:
        out.append(f"if {n} < 0:")
        if nullable:
            out.append(f"    if {n} != -1:")
            out.append(f"        raise _IL('negative {what} length %d' % {n})")
            out.append(f"    {target} = None")
        else:
            out.append(f"    if {n} == -1:")
            out.append(f"        raise _UN('{what} is not nullable here')")
            out.append(f"    raise _IL('negative {what} length %d' % {n})")

    def _decode_field(
        self,
        out: list[str],
        f: Field,
        target: str,
        b: str,
        p: str,
        e: str,
        pre: _ReadAhead | None = None,
    ) -> None:
        """Append statements decoding field ``f`` from ``b`` at ``p`` into ``target``."""
        if self.shortcuts and self.flexible and self._fast_path(f):
            # A short fast path for the common shape (not null, a 1- or 2-byte compact
            # length), then the general code for everything else.
            if pre is None:
                first = self._var("b")
                out.append(f"{first} = {b}[{p}]")
                pre = _ReadAhead(0, (first,))
            self._decode_fast(out, f, target, b, p, e, pre)
            out.append("else:")
            general: list[str] = []
            self._decode_general(general, f, target, b, p, e, pre)
            out.extend("    " + line for line in general)
            return
        self._decode_general(out, f, target, b, p, e, pre)

    def _fast_path(self, f: Field) -> bool:
        """Whether ``f`` gets a fast path: int arrays and strings, bytes, records."""
        if f.is_struct:
            return False
        if f.is_array:
            return f.element_type in t.FIXED_FORMATS and f.element_type != "uuid"
        return self._fixed(f) is None

    def _decode_fast(
        self, out: list[str], f: Field, target: str, b: str, p: str, e: str, pre: _ReadAhead
    ) -> None:
        """The fast-path branches of ``_decode_field``; each is an ``if``/``elif`` whose
        condition proves the general code would take the same path with the same result."""
        first, skip = pre.names[0], pre.skip
        if f.is_array:
            # A count byte c in 1..32 is one varint byte meaning c - 1 elements; a Struct
            # per c skips that byte ("x") and reads the elements; a short buffer makes it
            # raise struct.error.
            code, size = t.FIXED_FORMATS[f.element_type]
            arr = self._skipping_unpackers(code)
            at = f"{p} + {skip}" if skip else p
            out.append(f"if 0 < {first} < 33:")
            out.append(f"    {target} = [*{arr}[{first}]({b}, {at})]")
            offset = skip + 1 - size
            sign = "+" if offset >= 0 else "-"
            out.append(f"    {p} += {first} * {size} {sign} {abs(offset)}")
            return
        if f.type == "string":
            convert = "str({}, 'utf-8')"
        elif f.type == "bytes":
            convert = "bytes({})"
        else:  # records: a zero-copy slice
            convert = "{}"
        stop = self._var("stop")
        one_byte = [
            # One length byte: the value starts at p + skip + 1 and has first - 1 bytes.
            f"if 0 < {first} < 0x80:",
            f"    {stop} = {p} + {skip} + {first}",
            f"    if {stop} > {e}:",
            f"        raise _BU('{f.name}: %d bytes claimed, %d left'"
            f" % ({first} - 1, {e} - {p} - {skip + 1}))",
            f"    {target} = {convert.format(f'{b}[{p} + {skip + 1}:{stop}]')}",
            f"    {p} = {stop}",
        ]
        two_bytes: list[str] = []
        if len(pre.names) > 1:
            # Two length bytes: a value of 127 bytes to 16 KiB. A zero second byte would be a
            # padded (non-canonical) small length, possibly null: left to the general code.
            second = pre.names[1]
            two_bytes = [
                f"if {first} > 0x7F and 0 < {second} < 0x80:",
                f"    {stop} = {p} + {skip + 1} + (({first} & 0x7F) | ({second} << 7))",
                f"    if {stop} > {e}:",
                f"        raise _BU('{f.name}: %d bytes claimed, %d left'"
                f" % ({stop} - {p} - {skip + 2}, {e} - {p} - {skip + 2}))",
                f"    {target} = {convert.format(f'{b}[{p} + {skip + 2}:{stop}]')}",
                f"    {p} = {stop}",
            ]
        # Record batches are rarely under 127 bytes: test their common case first.
        branches = [two_bytes, one_byte] if f.type == "records" else [one_byte, two_bytes]
        branches = [branch for branch in branches if branch]
        for branch in branches[1:]:
            branch[0] = "el" + branch[0]
        for branch in branches:
            out.extend(branch)

    def _decode_general(
        self,
        out: list[str],
        f: Field,
        target: str,
        b: str,
        p: str,
        e: str,
        pre: _ReadAhead | None = None,
    ) -> None:
        nullable = self._nullable(f)
        if f.is_array:
            n = self._var("n")
            self._length(out, n, b, p, True, pre)
            self._null_check(out, n, target, nullable, f"array {f.name}")
            out.append("else:")
            inner: list[str] = []
            self._decode_array_body(inner, f, target, n, b, p, e)
            out.extend("    " + line for line in inner)
            return
        if f.is_struct:
            child = self._child(f)
            inner = []
            self._decode_struct(inner, child, target, b, p, e)
            if nullable:
                flag = self._var("flag")
                out.append(f"{flag} = _I8u({b}, {p})[0]")
                out.append(f"{p} += 1")
                out.append(f"if {flag} < 0:")
                out.append(f"    {target} = None")
                out.append("else:")
                out.extend("    " + line for line in inner)
            else:
                out.extend(inner)
            return
        fixed = self._fixed(f)
        if fixed is not None:
            out.append(f"{target} = {self._unpacker(fixed[0])}({b}, {p})[0]")
            out.append(f"{p} += {fixed[1]}")
            if f.type == "uuid":
                out.append(f"{target} = _UUID(bytes={target})")
            return
        n = self._var("n")
        self._length(out, n, b, p, f.type != "string", pre)
        self._null_check(out, n, target, nullable, f"{f.type} {f.name}")
        out.append("else:")
        stop = self._var("stop")
        out.append(f"    {stop} = {p} + {n}")
        out.append(f"    if {stop} > {e}:")
        out.append(f"        raise _BU('{f.name}: %d bytes claimed, %d left' % ({n}, {e} - {p}))")
        if f.type == "string":
            out.append(f"    {target} = str({b}[{p}:{stop}], 'utf-8')")
        elif f.type == "bytes":
            out.append(f"    {target} = bytes({b}[{p}:{stop}])")
        else:  # records: a zero-copy slice
            out.append(f"    {target} = {b}[{p}:{stop}]")
        out.append(f"    {p} = {stop}")

    def _decode_array_body(
        self, out: list[str], f: Field, target: str, n: str, b: str, p: str, e: str
    ) -> None:
        element = f.element_type
        if f.is_struct:
            min_size = max(self.min_size(self._child(f)), 1)
        elif element in t.FIXED_FORMATS:
            min_size = t.FIXED_FORMATS[element][1]
        elif element == "string":
            min_size = 1 if self.flexible else 2
        else:
            min_size = 1 if self.flexible else 4
        check = [
            f"if {n} * {min_size} > {e} - {p}:",
            f"    raise _IL('array {f.name} of %d elements cannot fit in %d bytes'"
            f" % ({n}, {e} - {p}))",
        ]
        if not (element in t.FIXED_FORMATS and element != "uuid"):
            out.extend(check)
        if f.is_struct:
            # The count was checked against the bytes left, so the list can be sized up front
            # and filled by index (cheaper than a call to append per element).
            child = self._child(f)
            item = self._var("it")
            index = self._var("i")
            out.append(f"{target} = [None] * {n}")
            out.append(f"for {index} in range({n}):")
            inner: list[str] = []
            self._decode_struct(inner, child, item, b, p, e)
            inner.append(f"{target}[{index}] = {item}")
            out.extend("    " + line for line in inner)
        elif element in t.FIXED_FORMATS and element != "uuid":
            code, size = t.FIXED_FORMATS[element]
            arr = self._array_unpackers(code)
            # Under 32 elements a precompiled Struct reads them (and fails cleanly if the
            # bytes are short); beyond, the count is checked before a format is built.
            out.append(f"if {n} < 32:")
            out.append(f"    {target} = [*{arr}[{n}]({b}, {p})]")
            out.append("else:")
            out.extend("    " + line for line in check)
            out.append(f"    {target} = list(_unpack_from('>%d{code}' % {n}, {b}, {p}))")
            out.append(f"{p} += {n} * {size}")
        elif element == "uuid":
            out.append(
                f"{target} = [_UUID(bytes=bytes({b}[{p} + 16 * i:{p} + 16 * i + 16]))"
                f" for i in range({n})]"
            )
            out.append(f"{p} += {n} * 16")
        else:
            item = self._var("it")
            compact = self.flexible
            if element == "string":
                reader = f"_read_string({b}, {p}, compact={compact})"
            elif element == "bytes":
                reader = f"_read_bytes({b}, {p}, compact={compact})"
            else:
                raise ValueError(f"{f.name}: arrays of {element} are not supported")
            out.append(f"{target} = []")
            out.append(f"for _ in range({n}):")
            out.append(f"    {item}, {p} = {reader}")
            out.append(f"    {target}.append({item})")

    def _decode_tagged_section(
        self,
        out: list[str],
        tagged: list[Field],
        prefix: str,
        b: str,
        p: str,
        e: str,
        pre: _ReadAhead | None,
    ) -> None:
        """The tagged-field section: known tags decoded, unknown tags skipped. ``pre`` holds
        the count's first byte when the preceding fixed run read it."""
        count, tag, size, stop = (self._var(x) for x in ("ntag", "tag", "size", "stop"))
        tb, tp, te = (self._var(x) for x in ("tb", "tp", "te"))
        skip = pre.skip if pre is not None else 0
        out.append(f"if {pre.names[0] if pre is not None else f'{b}[{p}]'}:")
        body: list[str] = []
        if skip:
            body.append(f"{p} += {skip}")
        body.append(f"{count}, {p} = _ruv({b}, {p})")
        body.append(f"if {count} > {e} - {p}:")
        body.append(
            f"    raise _IL('%d tagged fields cannot fit in %d bytes' % ({count}, {e} - {p}))"
        )
        body.append(f"for _ in range({count}):")
        loop: list[str] = []
        loop.append(f"{tag}, {p} = _ruv({b}, {p})")
        loop.append(f"{size}, {p} = _ruv({b}, {p})")
        loop.append(f"{stop} = {p} + {size}")
        loop.append(f"if {stop} > {e}:")
        loop.append(
            f"    raise _BU('tagged field %d: %d bytes claimed, %d left'"
            f" % ({tag}, {size}, {e} - {p}))"
        )
        first = True
        # A tagged value's sub-buffer ends with the value: nothing may be read past it.
        tail_safe, self._tail_safe = self._tail_safe, False
        for f in tagged:
            loop.append(f"{'if' if first else 'elif'} {tag} == {f.tag}:")
            first = False
            sub: list[str] = [f"{tb} = {b}[{p}:{stop}]", f"{tp} = 0", f"{te} = {stop} - {p}"]
            self._decode_field(sub, f, f"{prefix}{f.name}", tb, tp, te)
            loop.extend("    " + line for line in sub)
        self._tail_safe = tail_safe
        loop.append(f"{p} = {stop}")
        body.extend("    " + line for line in loop)
        out.extend("    " + line for line in body)
        out.append("else:")
        out.append(f"    {p} += {skip + 1}")

    # -- encoders ----------------------------------------------------------------------------

    def _encoder(self, info: _StructInfo) -> str:
        lines = [f"def {self.encoder_name(info)}(w, o, ext):"]
        body: list[str] = []
        self._encode_struct(body, info, "o", "w", "ext")
        if not body:
            body.append("pass")
        lines.extend("    " + line for line in body)
        return "\n".join(lines)

    def _encode_struct(self, out: list[str], info: _StructInfo, obj: str, w: str, ext: str) -> None:
        regular = self._regular(info.fields)
        i = 0
        while i < len(regular):
            f = regular[i]
            if self._fixed(f) is not None:
                group = [f]
                while i + 1 < len(regular) and self._fixed(regular[i + 1]) is not None:
                    i += 1
                    group.append(regular[i])
                fmt = "".join(self._fixed_of(g)[0] for g in group)
                s = self._struct(fmt)
                args = ", ".join(
                    f"{obj}.{g.name}.bytes" if g.type == "uuid" else f"{obj}.{g.name}"
                    for g in group
                )
                out.append(f"{w} += {s}.pack({args})")
            else:
                value = self._var("v")
                out.append(f"{value} = {obj}.{f.name}")
                self._encode_field(out, f, value, w, ext)
            i += 1
        if self.flexible:
            self._encode_tagged_section(out, info, obj, w)

    def _write_length(self, out: list[str], w: str, n: str, wide: bool) -> None:
        if self.flexible:
            m = self._var("m")
            out.append(f"{m} = {n} + 1")
            out.append(f"if {m} < 0x80:")
            out.append(f"    {w}.append({m})")
            out.append("else:")
            out.append(f"    {w} += _uvb({m})")
        elif wide:
            out.append(f"{w} += _I32.pack({n})")
        else:
            out.append(f"{w} += _I16.pack({n})")

    def _write_null(self, out: list[str], w: str, wide: bool) -> None:
        if self.flexible:
            out.append(f"{w}.append(0)")
        elif wide:
            out.append(f"{w} += b'\\xff\\xff\\xff\\xff'")
        else:
            out.append(f"{w} += b'\\xff\\xff'")

    def _encode_field(self, out: list[str], f: Field, v: str, w: str, ext: str) -> None:
        nullable = self._nullable(f)
        inner: list[str] = []
        if f.is_array:
            wide = True
        elif f.is_struct:
            wide = False
        else:
            wide = f.type != "string"
        if nullable:
            out.append(f"if {v} is None:")
            if f.is_struct and not f.is_array:
                out.append(f"    {w} += b'\\xff'")
            else:
                tmp: list[str] = []
                self._write_null(tmp, w, wide)
                out.extend("    " + line for line in tmp)
            out.append("else:")
        if f.is_array:
            n = self._var("n")
            inner.append(f"{n} = len({v})")
            self._write_length(inner, w, n, wide=True)
            self._encode_array_items(inner, f, v, n, w, ext)
        elif f.is_struct:
            if nullable:
                inner.append(f"{w}.append(1)")
            self._encode_struct(inner, self._child(f), v, w, ext)
        elif f.type == "string":
            data = self._var("s")
            n = self._var("n")
            inner.append(f"{data} = {v}.encode()")
            inner.append(f"{n} = len({data})")
            self._write_length(inner, w, n, wide=False)
            inner.append(f"{w} += {data}")
        elif f.type == "bytes":
            n = self._var("n")
            inner.append(f"{n} = len({v})")
            self._write_length(inner, w, n, wide=True)
            inner.append(f"{w} += {v}")
        elif f.type == "records":
            n = self._var("n")
            inner.append(f"{n} = len({v})")
            self._write_length(inner, w, n, wide=True)
            inner.append(f"if {ext} is None:")
            inner.append(f"    {w} += {v}")
            inner.append("else:")
            inner.append(f"    {ext}.append((len({w}), {v}))")
        else:
            fixed = self._fixed(f)
            assert fixed is not None
            s = self._struct(fixed[0])
            arg = f"{v}.bytes" if f.type == "uuid" else v
            inner.append(f"{w} += {s}.pack({arg})")
        if nullable:
            out.extend("    " + line for line in inner)
        else:
            out.extend(inner)

    def _encode_array_items(
        self, out: list[str], f: Field, v: str, n: str, w: str, ext: str
    ) -> None:
        element = f.element_type
        item = self._var("it")
        if f.is_struct:
            out.append(f"for {item} in {v}:")
            inner: list[str] = []
            self._encode_struct(inner, self._child(f), item, w, ext)
            if not inner:
                inner.append("pass")
            out.extend("    " + line for line in inner)
        elif element in t.FIXED_FORMATS and element != "uuid":
            code = t.FIXED_FORMATS[element][0]
            arr = self._array_struct(code)
            out.append(f"if {n} < 32:")
            out.append(f"    {w} += {arr}[{n}].pack(*{v})")
            out.append("else:")
            out.append(f"    {w} += _pack('>%d{code}' % {n}, *{v})")
        elif element == "uuid":
            out.append(f"for {item} in {v}:")
            out.append(f"    {w} += {item}.bytes")
        elif element in ("string", "bytes"):
            writer = "_write_string" if element == "string" else "_write_bytes"
            out.append(f"for {item} in {v}:")
            out.append(f"    if {item} is None:")
            out.append(f"        raise _EE('{f.name}: null element')")
            out.append(f"    {writer}({w}, {item}, compact={self.flexible})")
        else:
            raise ValueError(f"{f.name}: arrays of {element} are not supported")

    def _differs_from_default(self, f: Field, v: str, default: Any) -> str:
        """A cheap test that ``v`` is not ``default``: field by field for flat structs, since
        a dataclass ``!=`` builds two tuples per call."""
        if f.is_struct and not f.is_array and default is not None:
            child = self._child(f)
            flat = all(not g.is_struct and not g.is_array for g in child.fields)
            if flat:
                tests = [f"{v} is None"]
                for g in child.fields:
                    tests.append(f"{v}.{g.name} != {self._const(getattr(default, g.name))}")
                return " or ".join(tests)
        if type(default) in (bool, int) or default is None:
            return f"{v} != {default!r}"
        return f"{v} != {self._const(default)}"

    def _encode_tagged_section(self, out: list[str], info: _StructInfo, obj: str, w: str) -> None:
        tagged = self._tagged(info.fields)
        if not tagged:
            out.append(f"{w}.append(0)")
            return
        tags = self._var("tg")
        out.append(f"{tags} = []")
        for f in tagged:
            kind, default = self.message._default_of(f)
            if kind == "factory":
                default = default()
            v = self._var("v")
            tw = self._var("tw")
            out.append(f"{v} = {obj}.{f.name}")
            out.append(f"if {self._differs_from_default(f, v, default)}:")
            sub: list[str] = [f"{tw} = bytearray()"]
            self._encode_field(sub, f, v, tw, "None")
            sub.append(f"{tags}.append(({f.tag}, {tw}))")
            out.extend("    " + line for line in sub)
        tag, tw = self._var("tag"), self._var("tw")
        out.append(f"if {tags}:")
        out.append(f"    {w} += _uvb(len({tags}))")
        out.append(f"    for {tag}, {tw} in {tags}:")
        out.append(f"        {w} += _uvb({tag})")
        out.append(f"        {w} += _uvb(len({tw}))")
        out.append(f"        {w} += {tw}")
        out.append("else:")
        out.append(f"    {w}.append(0)")


# -- plans for the C decoder -------------------------------------------------------------------


def _plan_field(gen: _Generator, f: Field) -> tuple[Any, ...]:
    """(name, kind, element, nullable, min_size, child struct plan or None); see _cdecode.c."""
    child = _plan_struct(gen, gen._child(f)) if f.is_struct else None
    min_size = 0
    if f.is_array:
        kind = "array"
        element = "struct" if f.is_struct else f.element_type
        if f.is_struct:
            min_size = max(gen.min_size(gen._child(f)), 1)
        elif element == "string":
            min_size = 1 if gen.flexible else 2
        elif element == "bytes":
            min_size = 1 if gen.flexible else 4
        elif element not in t.FIXED_FORMATS:
            raise ValueError(f"{f.name}: arrays of {element} are not supported")
    else:
        kind = "struct" if f.is_struct else f.type
        element = ""
    return (f.name, kind, element, gen._nullable(f), min_size, child)


def _plan_struct(gen: _Generator, info: _StructInfo) -> tuple[Any, ...]:
    """(class, fields in wire order, (tag, field) pairs, (name, default, is_factory) for every
    other field) for one struct in ``gen``'s version, as the generated decoder sees it."""
    regular = gen._regular(info.fields)
    tagged = gen._tagged(info.fields) if gen.flexible else []
    present = {f.name for f in regular}
    defaults: list[tuple[str, Any, bool]] = []
    for f in info.fields:
        if f.name in present:
            continue
        # The same value or factory as the generated decoder's _default_expr.
        kind, value = gen.message._default_of(f)
        if kind == "factory" and f.is_struct and not f.is_array:
            child = gen._child(f)
            if all(not g.is_array and not g.is_struct for g in child.fields):
                kind, value = "value", value()
        defaults.append((f.name, value, kind == "factory"))
    return (
        info.cls,
        tuple(_plan_field(gen, f) for f in regular),
        tuple((f.tag, _plan_field(gen, f)) for f in tagged),
        tuple(defaults),
    )


def _versions_note(f: Field) -> str:
    """The versions a field exists in, as a comment beside it in the stubs."""
    note = f"versions {f.versions}"
    if str(f.nullable_versions) != "none":
        note += f", nullable {f.nullable_versions}"
    if f.tag is not None:
        note += f", tag {f.tag} in {f.tagged_versions}"
    return note


STUB_COMMAND: Final = "python -m josefk.protocol.stubgen"


def render_stubs(messages: list[CompiledMessage]) -> str:
    """The text of ``message_types.pyi``: typed declarations of every generated message class
    (``ProduceRequest``, with ``ProduceRequest.TopicProduceData`` ...), so that mypy checks the
    field access of code that annotates with them. ``messages`` in api-key order, request
    before response; the output depends on nothing else."""
    lines = [
        f"# Generated by `{STUB_COMMAND}` from josefk/protocol/messages: do not edit.",
        '"""The generated message classes, typed for mypy (see josefk/protocol/message_types.py)."""',
        "",
        "import uuid",
        "from dataclasses import dataclass",
        "from typing import ClassVar, TypeAlias",
        "",
        "from josefk.protocol.compiler import CompiledMessage",
        "",
    ]
    for message in messages:
        lines.append("")
        lines.extend(message.stub_lines())
    while lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


_CACHE: dict[int, tuple[MessageSpec, CompiledMessage]] = {}
_CACHE_LOCK = threading.Lock()


def compile_message(spec: MessageSpec) -> CompiledMessage:
    """The compiled form of ``spec``, built once and cached for the life of the process."""
    hit = _CACHE.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    with _CACHE_LOCK:
        hit = _CACHE.get(id(spec))
        if hit is not None and hit[0] is spec:
            return hit[1]
        compiled = CompiledMessage(spec)
        _CACHE[id(spec)] = (spec, compiled)
        return compiled
