"""Whether this machine can run a config: its device, its physical memory, its shared-memory file, its file tiers.

``kvcontract config validate`` and ``kvcontract simulate`` both ask :func:`check_machine`, so
what one refuses the other refuses, with the same line naming the field.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from pydantic import (
    ByteSize,
)

from kvcontract.config.errors import ConfigError
from kvcontract.config.limits import ConfigLimits
from kvcontract.config.manager import CPUManagerConfig, TieringManagerConfig
from kvcontract.config.model import KVContractConfig
from kvcontract.config.tiers import FileTierConfig

_PSEUDO_FILESYSTEMS = frozenset({"proc", "sys"})
"""Top folders of the kernel's views (procfs, sysfs), which hold no files a tier could write."""


def physical_memory_bytes() -> int:
    """This machine's physical memory: the most host memory a config may ask for to run here."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # no sysconf here: only the static limit applies
        return ConfigLimits.MAX_HOST_BYTES


def check_machine(
    config: KVContractConfig, source: str = "config", *, longest_request: int = 0, engines: int = 1
) -> None:
    """Raise :class:`ConfigError` unless this machine can run ``config``: its device exists, its
    host memory fits in physical memory, a shared-memory file present has the buffer's size, and
    each file tier's root is a safe folder on a disk with room for the tier (:func:`_file_tier_problems`).

    For a simulation, ``longest_request`` (in offload blocks) sizes the simulated KV cache of
    each of ``engines`` engines (two request regions each), which must fit beside the host
    buffers: on the device when it is CUDA, else in the same physical memory.
    """
    problems: list[str] = []
    device = config.transfer.device
    cuda = device.startswith("cuda")
    if cuda:
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if int(device.partition(":")[2] or 0) >= count:
            problems.append(
                f"transfer.device: {device} does not exist on this machine ({count} CUDA devices); use auto or cpu"
            )
    elif device == "auto":
        import torch

        cuda = torch.cuda.is_available()
    block = config.kv_layout.offload_block_bytes
    host_bytes = config.host_blocks * block
    memory = physical_memory_bytes()
    if host_bytes > memory:
        problems.append(
            f"{_primary_path(config)}: {ByteSize(host_bytes).human_readable()} of host memory{_if_default(config)} "
            f"is more than this machine's {ByteSize(memory).human_readable()} of physical memory"
        )
    elif longest_request:
        problems += _simulation_problems(config, longest_request, engines, cuda=cuda and not problems, memory=memory)
    shared = config.transfer.shared_memory_path
    if shared is not None:
        problem = _shared_file_problem(Path(shared), host_bytes)
        if problem is not None:
            problems.append(f"transfer.shared_memory_path: {problem}")
    problems += _file_tier_problems(config)
    if problems:
        raise ConfigError(source, problems)


def _simulation_problems(config: KVContractConfig, longest: int, engines: int, *, cuda: bool, memory: int) -> list[str]:
    """Why the simulated KV caches and the host buffers of ``engines`` engines do not fit, if they do not."""
    block = config.kv_layout.offload_block_bytes
    kv_cache = 2 * max(1, longest) * block
    needed = engines * (kv_cache + config.host_blocks * block)
    of_engines = f" for each of {engines} engines" if engines > 1 else ""
    if cuda:
        import torch

        _, total = torch.cuda.mem_get_info(_cuda_device(config.transfer.device))
        if engines * kv_cache > total:
            return [
                f"the simulated KV cache ({ByteSize(kv_cache).human_readable()} for requests of {longest} blocks"
                f"{of_engines}) is more than {config.transfer.device}'s {ByteSize(total).human_readable()}"
            ]
        needed -= engines * kv_cache
    if needed > memory:
        return [
            f"host buffer and simulated KV cache ({ByteSize(needed).human_readable()}, requests of up to {longest} "
            f"blocks{of_engines}) are more than this machine's {ByteSize(memory).human_readable()} of physical memory"
        ]
    return []


def _cuda_device(device: str) -> str:
    return "cuda" if device == "auto" else device


def _if_default(config: KVContractConfig) -> str:
    """`` (the default ...: set FIELD)`` when the config never gave the host memory's capacity."""
    if "capacity" in config.primary.model_fields_set:
        return ""
    return f" (the default, {config.host_blocks:,} blocks of this layout: set {_primary_path(config)})"


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


def _file_tier_problems(config: KVContractConfig) -> list[str]:
    """Why each file tier cannot run here: a root under ``/proc`` or ``/sys``, a root the tier would
    refuse to trust (as it does when built), or a capacity beyond the disk's free space."""
    if not isinstance(config.manager, TieringManagerConfig):
        return []
    problems: list[str] = []
    block = config.kv_layout.offload_block_bytes
    for index, tier in enumerate(config.manager.secondary):
        if isinstance(tier, FileTierConfig):
            problems += _file_tier_problem(tier, f"manager.secondary.{index}", block)
    return problems


def _file_tier_problem(tier: FileTierConfig, field: str, block_bytes: int) -> list[str]:
    from kvcontract.tiers.file.block_dir import root_owner_problem  # the tiers' package builds contracts on import

    root = Path(os.path.realpath(tier.path))
    if len(root.parts) > 1 and root.parts[1] in _PSEUDO_FILESYSTEMS:
        return [
            f"{field}.path: {tier.path} is under /{root.parts[1]}, a view of the kernel that holds no "
            "files; give a folder on a disk, e.g. /var/cache/kvcontract"
        ]
    existing = next((folder for folder in (root, *root.parents) if folder.exists()), Path("/"))
    if existing != root and not os.access(existing, os.W_OK | os.X_OK):
        return [f"{field}.path: {tier.path} cannot be created: {existing} is not writable by this user"]
    if existing == root:
        if not root.is_dir():
            return [f"{field}.path: {tier.path} exists and is not a directory"]
        owner = None if tier.trust_shared_root else root_owner_problem(tier.path, root.stat(), tier.umask)
        if owner is not None:
            return [f"{field}.path: {owner}"]
    wanted = int(tier.capacity) * block_bytes
    free = shutil.disk_usage(existing).free
    if wanted > free and wanted > free + _bytes_under(root):
        return [
            f"{field}.capacity: {ByteSize(wanted).human_readable()} is more than the "
            f"{ByteSize(free).human_readable()} free on the disk of {tier.path} (with what the root "
            "already holds): lower the capacity or free the disk"
        ]
    return []


def _bytes_under(folder: Path) -> int:
    """Bytes of the files below ``folder`` (a tier's earlier blocks, which it keeps); 0 if there is none.

    Walked only when a capacity passes the disk's free space, so a common start pays nothing.
    """
    total = 0
    for parent, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(parent, name)).st_size
            except OSError:  # removed since the listing
                continue
    return total
