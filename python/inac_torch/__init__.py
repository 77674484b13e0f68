"""inac_torch: PyTorch all-reduces through INAC's in-network aggregation (docs/pytorch.md).

    import inac_torch
    with inac_torch.open(job=7, worker="h1") as session:
        result = session.allreduce_(tensor)   # in place, contiguous CPU float32 or int32

    state = inac_torch.HookState.open(7, "h1", fallback_timeout_ms=5000)
    ddp_model.register_comm_hook(state, inac_torch.comm_hook)

Pure Python over libinac_client (agent/inac_client.h) with ctypes. The library is found via
$INAC_CLIENT_LIB, else <repo>/build/agent/libinac_client.so, else the system's library path.
"""

from . import bfp
from ._clib import InacError, version as library_version
from .hook import HookState, comm_hook
from .session import Result, Session, Stats, open

__all__ = ["open", "Session", "Result", "Stats", "InacError", "HookState", "comm_hook", "bfp",
           "library_version"]
__version__ = "0.1.0"
