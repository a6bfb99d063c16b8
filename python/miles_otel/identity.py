"""Who is emitting: node, rank, GPUs (NVML index + UUID), resolved lazily on the exporter's worker thread.

GPU identity never needs nvidia-smi or a Python NVML binding:

1. which devices the process uses: ``CUDA_VISIBLE_DEVICES`` (indices, ``GPU-…`` UUIDs, or ``""`` for a Ray
   actor without GPUs), narrowed to ``torch.cuda.current_device()`` when torch is already imported and CUDA is
   initialised (train ranks), else to ``LOCAL_RANK`` when a train rank sees several devices;
2. the node's device table (NVML index → UUID): ``libnvidia-ml.so.1`` through ctypes when the driver library is
   loadable, else ``/proc/driver/nvidia/gpus/*/information`` ordered by PCI bus id (NVML's default order).

An index given in ``CUDA_VISIBLE_DEVICES`` is taken as the physical (NVML) index, as Ray and most launchers set it.
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys
import threading
from typing import Mapping, Sequence

from . import semconv as sc

PROC_GPUS = "/proc/driver/nvidia/gpus"


# ---- node / run ----


def node_name(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return env.get(sc.ENV_NODE) or socket.gethostname()


def run_id(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    rid = env.get(sc.ENV_RUN_ID)
    if rid:
        return rid
    run_dir = env.get(sc.ENV_RUN_DIR)
    if run_dir:
        return os.path.basename(os.path.normpath(run_dir)) or None
    return None


# ---- device table ----


class DeviceTable:
    """NVML index ↔ UUID for the GPUs of this node."""

    def __init__(self, uuids: Sequence[str], source: str) -> None:
        self.uuids = list(uuids)  # position = NVML index
        self.source = source

    def uuid(self, index: int) -> str:
        return self.uuids[index] if 0 <= index < len(self.uuids) else ""

    def index_of(self, uuid: str) -> int | None:
        u = uuid.lower()
        hits = [i for i, x in enumerate(self.uuids) if x.lower() == u]
        if not hits:  # CUDA accepts a unique prefix of a UUID
            hits = [i for i, x in enumerate(self.uuids) if x.lower().startswith(u)]
        return hits[0] if len(hits) == 1 else None


def nvml_table(libname: str = "libnvidia-ml.so.1") -> DeviceTable | None:
    """Device table from the NVIDIA driver's NVML library via ctypes (no Python binding needed)."""
    try:
        lib = ctypes.CDLL(libname)
    except OSError:
        return None
    try:
        if lib.nvmlInit_v2() != 0:
            return None
        try:
            count = ctypes.c_uint(0)
            if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
                return None
            uuids = []
            for i in range(count.value):
                handle = ctypes.c_void_p()
                if lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(i), ctypes.byref(handle)) != 0:
                    uuids.append("")
                    continue
                buf = ctypes.create_string_buffer(96)
                if lib.nvmlDeviceGetUUID(handle, buf, ctypes.c_uint(96)) != 0:
                    uuids.append("")
                    continue
                uuids.append(buf.value.decode("ascii", "replace"))
            return DeviceTable(uuids, "nvml")
        finally:
            lib.nvmlShutdown()
    except Exception:
        return None


def proc_table(root: str = PROC_GPUS) -> DeviceTable | None:
    """Device table from the driver's procfs: one directory per GPU named by PCI bus id."""
    try:
        entries = sorted(os.listdir(root), key=str.lower)
    except OSError:
        return None
    uuids = []
    for bus in entries:
        uuid = ""
        try:
            with open(os.path.join(root, bus, "information"), encoding="utf-8", errors="replace") as f:
                for line in f:
                    k, _, v = line.partition(":")
                    if k.strip() == "GPU UUID":
                        uuid = v.strip()
                        break
        except OSError:
            pass
        uuids.append(uuid)
    return DeviceTable(uuids, "procfs") if uuids else None


_table_lock = threading.Lock()
_table_cache: list = []  # [DeviceTable | None] once resolved


def device_table() -> DeviceTable | None:
    """The node's device table, resolved once per process (NVML via ctypes, else procfs, else None)."""
    with _table_lock:
        if not _table_cache:
            table = None
            if os.environ.get("MILES_OTEL_NO_NVML") != "1":
                table = nvml_table()
            if table is None or not table.uuids:
                table = proc_table() or table
            _table_cache.append(table)
        return _table_cache[0]


def _reset_table_cache() -> None:
    with _table_lock:
        _table_cache.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_table_cache)


# ---- process GPUs and rank ----


def parse_visible(value: str | None) -> list[str] | None:
    """``CUDA_VISIBLE_DEVICES`` → entries; None when unset (all devices visible), [] when empty or "-1"."""
    if value is None:
        return None
    out = []
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        if part.lstrip("-").isdigit() and int(part) < 0:
            break  # CUDA stops at the first invalid index
        out.append(part)
    return out


def torch_state() -> tuple[int | None, int | None]:
    """(rank, current CUDA device) from an already-imported torch; never imports torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None, None
    rank = device = None
    try:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            rank = int(dist.get_rank())
    except Exception:
        pass
    try:
        if torch.cuda.is_initialized():
            device = int(torch.cuda.current_device())
    except Exception:
        pass
    return rank, device


def resolve_gpus(
    role: str,
    env: Mapping[str, str],
    table: DeviceTable | None,
    cuda_device: int | None = None,
) -> tuple[list[int], list[str]]:
    """The NVML indices and UUIDs (same order; "" unknown) of the GPUs this process uses."""
    visible = parse_visible(env.get("CUDA_VISIBLE_DEVICES"))
    train = role == sc.ROLE_TRAIN
    local_rank = env.get("LOCAL_RANK")
    local = int(local_rank) if local_rank is not None and local_rank.isdigit() else None
    if train and cuda_device is not None:
        if visible is None:
            entries = [str(cuda_device)]
        else:
            entries = [visible[cuda_device]] if cuda_device < len(visible) else []
    elif visible is not None:
        if train and len(visible) > 1 and local is not None and local < len(visible):
            entries = [visible[local]]
        else:
            entries = visible
    elif train and local is not None:
        entries = [str(local)]
    else:
        entries = []
    ids: list[int] = []
    uuids: list[str] = []
    for e in entries:
        if e.isdigit():
            idx = int(e)
            ids.append(idx)
            uuids.append(table.uuid(idx) if table else "")
        elif e.upper().startswith("GPU-"):
            idx = table.index_of(e) if table else None
            if idx is None:
                continue  # a UUID we cannot place on an NVML index gives no lane
            ids.append(idx)
            uuids.append(table.uuid(idx))
        # MIG-… and anything else: the parent GPU's index is not derivable here; skipped
    return ids, uuids


def resolve_rank(role: str, env: Mapping[str, str], torch_rank: int | None) -> int:
    if role != sc.ROLE_TRAIN:
        return -1
    if torch_rank is not None:
        return torch_rank
    r = env.get("RANK")
    if r is not None and r.lstrip("-").isdigit():
        return int(r)
    return -1


class PhaseIdentity:
    """The per-process phase attributes (role, rank, GPUs) of one sink, resolved lazily and cached.

    A train rank usually attaches its sink before ``torch.distributed`` is initialised and before it picks its
    CUDA device, so until the rank and a single device are known the identity is re-resolved (at most once per
    ``retry_s``); after that it is fixed."""

    def __init__(
        self,
        role: str,
        *,
        rank: int | None = None,
        gpus: Sequence[int] | None = None,
        gpu_uuids: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        table_fn=device_table,
        torch_fn=torch_state,
        clock=None,
        retry_s: float = 1.0,
    ) -> None:
        import time

        self.role = role
        self._rank = rank
        self._gpus = list(gpus) if gpus is not None else None
        self._uuids = list(gpu_uuids) if gpu_uuids is not None else None
        self._env = env
        self._table_fn = table_fn
        self._torch_fn = torch_fn
        self._clock = clock or time.monotonic
        self._retry_s = retry_s
        self._cached: dict | None = None
        self._final = False
        self._next = 0.0
        self.resolutions = 0  # how many times it was computed (tests)

    def attrs(self) -> dict:
        if self._cached is not None and (self._final or self._clock() < self._next):
            return self._cached
        self._cached = self._resolve()
        self._next = self._clock() + self._retry_s
        return self._cached

    def _resolve(self) -> dict:
        self.resolutions += 1
        env = os.environ if self._env is None else self._env
        t_rank, t_dev = self._torch_fn()
        rank = self._rank if self._rank is not None else resolve_rank(self.role, env, t_rank)
        if self._gpus is not None:
            ids = list(self._gpus)
            if self._uuids is not None:
                uuids = list(self._uuids)
            else:
                table = self._table_fn()
                uuids = [table.uuid(i) if table else "" for i in ids]
        else:
            ids, uuids = resolve_gpus(self.role, env, self._table_fn(), t_dev)
        train = self.role == sc.ROLE_TRAIN
        self._final = (not train) or (rank >= 0 and (self._gpus is not None or t_dev is not None or len(ids) == 1))
        a: dict = {sc.ROLE: self.role, sc.RANK: rank, sc.GPU_IDS: ids}
        if any(uuids):
            a[sc.GPU_UUIDS] = uuids
        return a
