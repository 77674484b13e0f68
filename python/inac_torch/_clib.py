"""ctypes binding of libinac_client (agent/inac_client.h): structures, prototypes, loading.

The library is loaded on first use (inac_torch.open), not at import: importing inac_torch never
fails because the library is missing; open() raises InacError naming every place it looked.
"""

import ctypes
import ctypes.util
import os
import threading

# inac_status, in the header's order.
STATUS_NAMES = {
    0: "OK",
    1: "INVALID_ARGUMENT",
    2: "NOT_FOUND",
    3: "UNAVAILABLE",
    4: "TIMEOUT",
    5: "FAILED_PRECONDITION",
    6: "RESOURCE_EXHAUSTED",
    7: "CANCELLED",
    8: "INTERNAL",
}
# inac_path.
PATH_NAMES = {1: "ina", 2: "ps"}


class InacError(RuntimeError):
    """A failed libinac_client call: `status` is the inac_status's name without its INAC_ prefix
    ("TIMEOUT", "UNAVAILABLE", ...), `code` its number (-1 when the library could not be loaded),
    `message` the library's inac_last_error()."""

    def __init__(self, status, message, code=None):
        self.status = status
        self.message = message
        self.code = code
        super().__init__(f"{status}: {message}" if message else status)


class Options(ctypes.Structure):
    _fields_ = [
        ("server", ctypes.c_char_p),
        ("token", ctypes.c_char_p),
        ("config_file", ctypes.c_char_p),
        ("bind", ctypes.c_char_p),
        ("port", ctypes.c_int),
        ("netns", ctypes.c_char_p),
        ("timeout_ms", ctypes.c_int),
        ("refresh_ms", ctypes.c_int),
    ]


class CResult(ctypes.Structure):
    _fields_ = [
        ("path", ctypes.c_int),
        ("scale_bits", ctypes.c_int),
        ("lanes", ctypes.c_int64),
        ("packets", ctypes.c_int64),
        ("retransmissions", ctypes.c_int64),
        ("saturated", ctypes.c_int64),
        ("plan_version", ctypes.c_int64),
        ("time_ms", ctypes.c_double),
    ]


class CStats(ctypes.Structure):
    _fields_ = [
        ("allreduces", ctypes.c_int64),
        ("failures", ctypes.c_int64),
        ("lanes", ctypes.c_int64),
        ("packets", ctypes.c_int64),
        ("retransmissions", ctypes.c_int64),
        ("saturated", ctypes.c_int64),
        ("plans", ctypes.c_int64),
        ("next_chunk", ctypes.c_int64),
        ("cpu_us", ctypes.c_int64),
    ]


_session_p = ctypes.c_void_p

# name: (restype, argtypes)
_PROTOTYPES = {
    "inac_options_init": (None, [ctypes.POINTER(Options)]),
    "inac_open": (ctypes.c_int, [ctypes.c_int64, ctypes.c_char_p, ctypes.POINTER(Options),
                                 ctypes.POINTER(_session_p)]),
    "inac_allreduce_i32": (ctypes.c_int, [_session_p, ctypes.c_void_p, ctypes.c_int64,
                                          ctypes.POINTER(CResult)]),
    "inac_allreduce_f32": (ctypes.c_int, [_session_p, ctypes.c_void_p, ctypes.c_int64,
                                          ctypes.POINTER(CResult)]),
    "inac_get_stats": (ctypes.c_int, [_session_p, ctypes.POINTER(CStats)]),
    "inac_report_data_path": (ctypes.c_int, [_session_p, ctypes.c_char_p, ctypes.c_char_p,
                                             ctypes.c_int64, ctypes.c_int64]),
    "inac_close": (None, [_session_p]),
    "inac_last_error": (ctypes.c_char_p, []),
    "inac_version": (ctypes.c_char_p, []),
}

_lock = threading.Lock()
_lib = None


def _repo_library_path():
    # python/inac_torch/_clib.py -> <repo>/build/agent/libinac_client.so
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "build", "agent",
                                         "libinac_client.so"))


def _candidates():
    """(description, path or None) in the order they are tried."""
    env = os.environ.get("INAC_CLIENT_LIB")
    if env:
        # Explicit: the only candidate, so a wrong setting is never masked by another copy.
        return [(f"$INAC_CLIENT_LIB={env}", env)]
    found = ctypes.util.find_library("inac_client")
    return [
        ("$INAC_CLIENT_LIB (unset)", None),
        (_repo_library_path(), _repo_library_path()),
        (f"the system's library path (find_library('inac_client') -> {found})", found),
    ]


def _bind(lib):
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError as e:
            raise InacError("NOT_FOUND", f"{lib._name} has no symbol {name} (an older "
                            "libinac_client? rebuild the inac_client target)", -1) from e
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def load():
    """The loaded library (loaded once); raises InacError(status "NOT_FOUND") naming every place
    it looked."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for description, path in _candidates():
            if path is None:
                tried.append(description)
                continue
            if os.sep in path and not os.path.exists(path):
                tried.append(f"{description} (no such file)")
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append(f"{description} ({e})")
                continue
            _lib = _bind(lib)
            return _lib
        raise InacError(
            "NOT_FOUND",
            "libinac_client not found; tried: " + "; ".join(tried) +
            ". Build it (cd build && make inac_client) or set INAC_CLIENT_LIB to the .so", -1)


def last_error(lib):
    message = lib.inac_last_error()
    return message.decode("utf-8", "replace") if message else ""


def version():
    """The library's inac_version() ("inac_client <version>"); raises InacError when missing."""
    return load().inac_version().decode("utf-8", "replace")
