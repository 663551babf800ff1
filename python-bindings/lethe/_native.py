"""ctypes binding of Lethe's C API (include/lethe-c/Lethe.h).

The library, liblethe-c.so, carries MLIR, LLVM, COIN-OR CBC and the C++
runtime and exports only the C API, so one file serves every Python 3
version: it is looked up at $LETHE_LIBRARY, else beside this file (where
the wheel and the CMake build, build/python/lethe, put it). It is loaded on
first use, so that the pure-Python parts of the package (the exporters,
lethe.schema) work without it. ctypes releases the GIL around every call.
The Python-facing API is in lethe/__init__.py.
"""

from __future__ import annotations

import ctypes
import os
import threading
import weakref
from typing import Any, Callable, Optional

LIBRARY_NAME = "liblethe-c.so"
ENVIRONMENT_VARIABLE = "LETHE_LIBRARY"
# The C API version this binding was written against (letheVersion()).
API_VERSION = "0.1.0"


class LetheError(ValueError):
    """Lethe rejected a graph, an option or a file; the message is
    Lethe's (`file:line:col: ` first where it has a location)."""

    __module__ = "lethe"  # where users find it


class _String(ctypes.Structure):
    # `data` stays a raw pointer: it is freed with letheStringDestroy.
    _fields_ = [("data", ctypes.c_void_p), ("length", ctypes.c_size_t)]


class _Status(ctypes.Structure):
    _fields_ = [("message", _String)]


_Handle = ctypes.c_void_p
_Path = ctypes.c_char_p

# name: (result type, argument types) of every C API function used here.
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "letheVersion": (ctypes.c_char_p, []),
    "letheStatusIsSuccess": (ctypes.c_int, [_Status]),
    "letheStatusDestroy": (None, [_Status]),
    "letheStringDestroy": (None, [_String]),
    "letheGraphLoadFile": (_Status, [_Path, ctypes.c_char_p,
                                     ctypes.POINTER(_Handle)]),
    "letheGraphLoadString": (_Status, [ctypes.c_char_p, ctypes.c_size_t,
                                       ctypes.c_char_p, ctypes.c_char_p,
                                       ctypes.c_char_p,
                                       ctypes.POINTER(_Handle)]),
    "letheGraphDestroy": (None, [_Handle]),
    "letheGraphPrint": (_Status, [_Handle, ctypes.POINTER(_String)]),
    "letheGraphReport": (_Status, [_Handle, ctypes.c_uint,
                                   ctypes.POINTER(_String)]),
    "letheGraphWriteTrace": (_Status, [_Handle, _Path]),
    "letheGraphPlanWithOptions": (_Status, [_Handle, ctypes.c_char_p,
                                            ctypes.POINTER(_Handle)]),
    "lethePlanDestroy": (None, [_Handle]),
    "lethePlanIsFeasible": (ctypes.c_int, [_Handle]),
    "lethePlanJson": (_Status, [_Handle, ctypes.POINTER(_String)]),
    "lethePlanWriteTrace": (_Status, [_Handle, _Path]),
    "lethePlanOptionDefaults": (_Status, [ctypes.POINTER(_String)]),
}

_library: Optional[ctypes.CDLL] = None
_lock = threading.Lock()


def library_path() -> str:
    """Where the library is looked up: $LETHE_LIBRARY, else beside this
    file."""
    return os.environ.get(ENVIRONMENT_VARIABLE) or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)


def _missing(path: str, why: str) -> ImportError:
    return ImportError(
        f"lethe's native library is not available: {why} ({path}). Install "
        f"the lethe wheel (scripts/build-wheel.sh builds it), or build the "
        f"library with scripts/build.sh and use PYTHONPATH=build/python, or "
        f"set {ENVIRONMENT_VARIABLE} to the path of {LIBRARY_NAME}",
        name=__name__, path=path)


def library() -> ctypes.CDLL:
    """The loaded library; ImportError if it is missing or unusable."""
    global _library
    with _lock:
        if _library is None:
            path = library_path()
            if not os.path.isfile(path):
                raise _missing(path, "no such file")
            try:
                lib = ctypes.CDLL(path)
            except OSError as error:
                raise _missing(path, str(error)) from error
            try:
                for name, (result, arguments) in _SIGNATURES.items():
                    function = getattr(lib, name)
                    function.restype = result
                    function.argtypes = arguments
            except AttributeError as error:
                raise _missing(path, f"not Lethe's C API: {error}") from error
            found = lib.letheVersion().decode()
            if found != API_VERSION:
                raise _missing(path, f"C API version {found}, this package "
                               f"needs {API_VERSION}")
            _library = lib
        return _library


def available() -> bool:
    """Whether the library loads."""
    try:
        library()
    except ImportError:
        return False
    return True


def version() -> str:
    """The C API's version."""
    return library().letheVersion().decode()


def plan_option_defaults() -> dict[str, str]:
    """The lethe-plan pass's options and their defaults as text, from the
    one declaration (Passes.td): {"alignment": "256", "device": "h200",
    ...}; an empty list option is left out."""
    text = _text(library().lethePlanOptionDefaults)
    options: dict[str, str] = {}
    for part in text.split():
        name, _, value = part.partition("=")
        # A value with spaces would be in braces; no default has one.
        options[name] = value.strip("{}")
    return options


def _check(status: _Status) -> None:
    lib = library()
    if lib.letheStatusIsSuccess(status):
        return
    message = ctypes.string_at(status.message.data,
                               status.message.length).decode(
                                   "utf-8", "replace")
    lib.letheStatusDestroy(status)
    raise LetheError(message)


def _take(string: _String) -> str:
    text = ctypes.string_at(string.data, string.length).decode("utf-8",
                                                               "replace")
    library().letheStringDestroy(string)
    return text


def _text(call: Callable[[Any], _Status]) -> str:
    """Runs a call that returns a LetheString through its last argument."""
    out = _String()
    _check(call(ctypes.byref(out)))
    return _take(out)


def _encode(text: Optional[str]) -> Optional[bytes]:
    """A C string; None and "" are NULL (the C API's default)."""
    return text.encode() if text else None


def _own(owner: object, destroy: Callable[..., None], *arguments: Any) -> None:
    """Calls destroy(*arguments) when `owner` is collected. Not at exit:
    the process releases everything then, whatever order objects die in."""
    weakref.finalize(owner, destroy, *arguments).atexit = False


class Plan:
    """Owns a LethePlan; keeps its graph alive (a plan refers to it)."""

    def __init__(self, handle: ctypes.c_void_p, graph: Graph) -> None:
        self._handle = handle
        self._graph = graph
        _own(self, library().lethePlanDestroy, handle)

    @property
    def feasible(self) -> bool:
        return bool(library().lethePlanIsFeasible(self._handle))

    def json(self) -> str:
        """The `lethe plan --json` document."""
        return _text(lambda out: library().lethePlanJson(self._handle, out))

    def write_trace(self, path: str) -> None:
        _check(library().lethePlanWriteTrace(self._handle,
                                             os.fsencode(path)))


class Graph:
    """Owns a LetheGraph (with its own MLIR context)."""

    def __init__(self, handle: ctypes.c_void_p) -> None:
        self._handle = handle
        _own(self, library().letheGraphDestroy, handle)

    @classmethod
    def load(cls, path: str, device: str) -> Graph:
        handle = _Handle()
        _check(library().letheGraphLoadFile(os.fsencode(path),
                                            device.encode(),
                                            ctypes.byref(handle)))
        return cls(handle)

    @classmethod
    def loads(cls, text: str, format: str, name: str, device: str) -> Graph:
        data = text.encode()
        handle = _Handle()
        _check(library().letheGraphLoadString(
            data, len(data), format.encode(), name.encode(), device.encode(),
            ctypes.byref(handle)))
        return cls(handle)

    def report(self, top: int) -> str:
        """The `lethe report --json` document."""
        return _text(lambda out: library().letheGraphReport(self._handle,
                                                            top, out))

    def mlir(self) -> str:
        return _text(lambda out: library().letheGraphPrint(self._handle, out))

    def write_trace(self, path: str) -> None:
        _check(library().letheGraphWriteTrace(self._handle,
                                              os.fsencode(path)))

    def plan(self, options: str) -> Plan:
        """Plans with the lethe-plan pass's options as `lethe-opt
        --lethe-plan='...'` takes them ("budget=50% n=3"; "": the
        defaults)."""
        handle = _Handle()
        _check(library().letheGraphPlanWithOptions(
            self._handle, _encode(options), ctypes.byref(handle)))
        return Plan(handle, self)
