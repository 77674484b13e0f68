"""Session: one worker of one running INAC job, over libinac_client (agent/inac_client.h)."""

import ctypes
import dataclasses
import os
import threading
from typing import Optional

import torch

from . import _clib
from ._clib import InacError


@dataclasses.dataclass
class Result:
    """How one all-reduce went.

    path: "ina" (at least one tag aggregated in a switch), "ps" (straight to the parameter
    servers) or, for a DDP bucket the hook sent through the other collective, "fallback".
    scale_bits: the s of the block floating point rule (float32), None for int32 (and fallback).
    """

    path: str
    scale_bits: Optional[int]
    lanes: int = 0
    packets: int = 0
    retransmissions: int = 0
    saturated: int = 0
    time_ms: float = 0.0
    plan_version: int = 0


@dataclasses.dataclass
class Stats:
    """The session's counters since open (inac_stats)."""

    allreduces: int
    failures: int
    lanes: int
    packets: int
    retransmissions: int
    saturated: int
    plans: int
    next_chunk: int
    cpu_us: int


def _text(value):
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    return os.fspath(value).encode("utf-8") if isinstance(value, os.PathLike) else \
        str(value).encode("utf-8")


def _check_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")
    return value


class Session:
    """An open libinac_client session; see inac_torch.open. Closing is idempotent; a closed
    session refuses all-reduces with InacError("FAILED_PRECONDITION")."""

    def __init__(self, lib, handle, job, worker, timeout_ms):
        self._lib = lib
        self._handle = handle  # ctypes.c_void_p; None once closed
        self._lock = threading.Lock()
        self.job = job
        self.worker = worker
        self.timeout_ms = timeout_ms

    # -- life cycle ------------------------------------------------------------------------
    @property
    def closed(self):
        return self._handle is None

    def close(self):
        with self._lock:
            handle, self._handle = self._handle, None
        if handle is not None:
            self._lib.inac_close(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return f"<inac_torch.Session job={self.job} worker={self.worker!r} {state}>"

    # -- calls -----------------------------------------------------------------------------
    def _fail(self, status):
        name = _clib.STATUS_NAMES.get(status, f"STATUS_{status}")
        return InacError(name, _clib.last_error(self._lib), status)

    def _require_open(self):
        if self._handle is None:
            raise InacError("FAILED_PRECONDITION",
                            f"session of worker {self.worker!r} in job {self.job} is closed", 5)

    def allreduce_(self, tensor):
        """Sums `tensor` over the job's members, in place, and returns a Result.

        `tensor` must be a contiguous CPU torch.float32 (block floating point, see
        docs/pytorch.md) or torch.int32 (exact, modulo 2^32) tensor; its memory is handed to the
        library as is (no copy). Every member must make the same sequence of calls with the same
        sizes. On InacError the tensor holds partial sums (keep a copy to fall back)."""
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"allreduce_ needs a torch.Tensor, got {type(tensor).__name__}")
        if tensor.layout != torch.strided:
            raise TypeError(f"allreduce_ needs a dense (strided) tensor, got {tensor.layout}")
        if tensor.device.type != "cpu":
            raise ValueError(f"allreduce_ needs a CPU tensor, got one on {tensor.device} "
                             "(copy it with .cpu() and back)")
        if tensor.dtype == torch.float32:
            fn = self._lib.inac_allreduce_f32
        elif tensor.dtype == torch.int32:
            fn = self._lib.inac_allreduce_i32
        else:
            raise TypeError(f"allreduce_ needs a torch.float32 or torch.int32 tensor, got "
                            f"{tensor.dtype} (convert it, e.g. t.float(), and copy back)")
        if not tensor.is_contiguous():
            raise ValueError("allreduce_ needs a contiguous tensor (the library sums its memory "
                             "in place); got strides "
                             f"{tuple(tensor.stride())} for shape {tuple(tensor.shape)}: use "
                             "t.contiguous() and copy the result back")
        if tensor.numel() == 0:
            raise ValueError("allreduce_ needs at least one value, got an empty tensor")
        if tensor.requires_grad:
            raise ValueError("allreduce_ would change a tensor that requires grad behind "
                             "autograd's back; pass tensor.detach() (same memory)")
        result = _clib.CResult()
        with self._lock:
            self._require_open()
            status = fn(self._handle, ctypes.c_void_p(tensor.data_ptr()), tensor.numel(),
                        ctypes.byref(result))
            if status != 0:
                raise self._fail(status)
        return Result(
            path=_clib.PATH_NAMES.get(result.path, f"unknown({result.path})"),
            scale_bits=result.scale_bits if tensor.dtype == torch.float32 else None,
            lanes=result.lanes,
            packets=result.packets,
            retransmissions=result.retransmissions,
            saturated=result.saturated,
            time_ms=result.time_ms,
            plan_version=result.plan_version,
        )

    def stats(self):
        """The session's Stats."""
        stats = _clib.CStats()
        with self._lock:
            self._require_open()
            status = self._lib.inac_get_stats(self._handle, ctypes.byref(stats))
            if status != 0:
                raise self._fail(status)
        return Stats(**{name: getattr(stats, name) for name, _ in _clib.CStats._fields_})

    def report(self, path, reason=None, allreduces=0, fallbacks=0):
        """Tells the controller how this worker's all-reduces are carried (POST
        /api/v1/jobs/{job}/data-path): `path` "ina", "ps" or "fallback", `reason` why (at most
        256 characters, no control characters; None for none), with the counts so far. A
        session opened from a configuration file reports only when a server was given;
        otherwise InacError("FAILED_PRECONDITION")."""
        if path not in ("ina", "ps", "fallback"):
            raise ValueError(f"path must be 'ina', 'ps' or 'fallback', got {path!r}")
        _check_int("allreduces", allreduces, 0, 2**53 - 1)
        _check_int("fallbacks", fallbacks, 0, 2**53 - 1)
        with self._lock:
            self._require_open()
            status = self._lib.inac_report_data_path(self._handle, path.encode(),
                                                     _text(reason), allreduces, fallbacks)
            if status != 0:
                raise self._fail(status)


def open(job, worker, *, server=None, token=None, config_file=None, bind=None, port=None,
         netns=None, timeout_ms=30000, refresh_ms=None):
    """Opens a session of `worker` (its host id in the topology) in job `job` and returns it.

    server/token: the controller (default $INAC_SERVER, else http://127.0.0.1:8080, and
    $INAC_TOKEN); config_file: read the job's configuration (the JSON of GET
    /api/v1/jobs/{job}/config) from this file instead of asking the controller; bind/port: the
    data-plane socket (default 0.0.0.0:48864, the port switches parse); netns: a network
    namespace name (/var/run/netns/NAME); timeout_ms: an all-reduce fails with
    InacError("TIMEOUT") after this long without a new result; refresh_ms: how often the
    session polls the configuration (None: the library's 500; negative: never).

    Raises InacError (status "NOT_FOUND" also when libinac_client itself cannot be found)."""
    _check_int("job", job, 1, 2**63 - 1)
    if not isinstance(worker, str) or not worker:
        raise TypeError(f"worker must be a non-empty str, got {worker!r}")
    _check_int("timeout_ms", timeout_ms, 1, 2**31 - 1)
    if port is not None:
        _check_int("port", port, 1, 65535)
    if refresh_ms is not None:
        _check_int("refresh_ms", refresh_ms, -(2**31), 2**31 - 1)
    lib = _clib.load()
    options = _clib.Options()
    lib.inac_options_init(ctypes.byref(options))
    options.server = _text(server)
    options.token = _text(token)
    options.config_file = _text(config_file)
    options.bind = _text(bind)
    options.port = port or 0
    options.netns = _text(netns)
    options.timeout_ms = timeout_ms
    if refresh_ms is not None:
        options.refresh_ms = refresh_ms
    handle = ctypes.c_void_p()
    status = lib.inac_open(job, worker.encode("utf-8"), ctypes.byref(options),
                           ctypes.byref(handle))
    if status != 0:
        name = _clib.STATUS_NAMES.get(status, f"STATUS_{status}")
        raise InacError(name, _clib.last_error(lib), status)
    if not handle.value:
        raise InacError("INTERNAL", "inac_open returned OK without a session", 8)
    return Session(lib, handle, job, worker, timeout_ms)
