"""Whether this machine can run a config: its device, its physical memory, its shared-memory file."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from pydantic import (
    ByteSize,
)

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on Python 3.10 only
    pass
from kvcontract.config.errors import ConfigError
from kvcontract.config.limits import ConfigLimits
from kvcontract.config.manager import CPUManagerConfig
from kvcontract.config.model import KVContractConfig


def physical_memory_bytes() -> int:
    """This machine's physical memory: the most host memory a config may ask for to run here."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # no sysconf here: only the static limit applies
        return ConfigLimits.MAX_HOST_BYTES


def check_machine(config: KVContractConfig, source: str = "config") -> None:
    """Raise :class:`ConfigError` unless this machine can run ``config``: its device exists, its
    host memory fits in physical memory, and a shared-memory file present has the buffer's size."""
    problems: list[str] = []
    device = config.transfer.device
    if device.startswith("cuda"):
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if int(device.partition(":")[2] or 0) >= count:
            problems.append(
                f"transfer.device: {device} does not exist on this machine ({count} CUDA devices); "
                "use auto or cpu"
            )
    host_bytes = config.host_blocks * config.kv_layout.offload_block_bytes
    memory = physical_memory_bytes()
    if host_bytes > memory:
        problems.append(
            f"{_primary_path(config)}: {ByteSize(host_bytes).human_readable()} of host memory is more "
            f"than this machine's {ByteSize(memory).human_readable()} of physical memory"
        )
    shared = config.transfer.shared_memory_path
    if shared is not None:
        problem = _shared_file_problem(Path(shared), host_bytes)
        if problem is not None:
            problems.append(f"transfer.shared_memory_path: {problem}")
    if problems:
        raise ConfigError(source, problems)


def _primary_path(config: KVContractConfig) -> str:
    return "manager.capacity" if isinstance(config.manager, CPUManagerConfig) else "manager.primary.capacity"


def _shared_file_problem(path: Path, size: int) -> str | None:
    """Why the host buffer of ``size`` bytes cannot map ``path`` (absent: it is created), or ``None``."""
    try:
        status = path.stat()
    except FileNotFoundError:
        if not path.parent.is_dir():
            return f"{path.parent} is not a directory, so {path} cannot be created"
        return None
    except OSError as error:
        return f"cannot read {path}: {error.strerror}"
    if not stat.S_ISREG(status.st_mode):
        return f"{path} is not a regular file"
    if status.st_size not in (0, size):
        return (
            f"{path} holds {status.st_size} bytes, this config's host buffer needs {size} "
            "(host blocks x bytes per offload block): use the same geometry, or remove the file"
        )
    return None
