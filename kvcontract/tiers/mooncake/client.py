"""Connecting to a Mooncake Store; Mooncake's client is imported here, only when a tier connects.

``import kvcontract`` and ``import kvcontract.tiers`` never import ``mooncake``, so the
package stays optional (extra ``kvcontract[mooncake]``). The client ships without type
information, so the calls the tier makes are declared here as a Protocol and the client
is reached through :func:`importlib.import_module`. Before the client's own setup (which
retries an absent master for about 90 s) the master and the metadata server are asked for
a TCP connection within ``timeout``, so a store that is not there is one clear line at once.
"""

from __future__ import annotations

import importlib
import os
import socket
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from kvcontract.extras import MissingExtraError

__all__ = [
    "DEFAULT_CLIENT",
    "MISSING_EXTRA",
    "MasterFaultError",
    "MooncakeClientOptions",
    "MooncakeConnection",
    "MooncakeStore",
    "MooncakeUnavailableError",
    "connect",
    "describe_code",
]

MISSING_EXTRA = (
    "the Mooncake tier needs Mooncake's client: pip install 'kvcontract[mooncake]' "
    "(on CUDA machines pip install mooncake-transfer-engine instead)"
)
"""The one error a missing client gives."""

P2P_HANDSHAKE = "P2PHANDSHAKE"
"""The ``metadata_server`` that tells the client to exchange segment metadata with its peers, with no server."""

OK = 0
NO_SPACE = -200
"""``NO_AVAILABLE_HANDLE``: the segments are full (Mooncake evicts above its high watermark, so it passes)."""
TOO_LONG = -600
"""``INVALID_PARAMS`` from a get: the value is longer than the buffers given for it."""
OBJECT_NOT_FOUND = -704
OBJECT_ALREADY_EXISTS = -705
TRANSFER_FAIL = -800
"""The segment holding the value did not answer: its client left the cluster."""
SEGMENT_NOT_FOUND = -101
RPC_FAIL = -900
RPC_TIMEOUT = -901
MASTER_FAULTS = frozenset({RPC_FAIL, RPC_TIMEOUT})
"""Codes that mean the master did not answer (the tier's breaker opens on them)."""
_NAMES = {
    NO_SPACE: "NO_AVAILABLE_HANDLE",
    TOO_LONG: "INVALID_PARAMS",
    OBJECT_NOT_FOUND: "OBJECT_NOT_FOUND",
    OBJECT_ALREADY_EXISTS: "OBJECT_ALREADY_EXISTS",
    -706: "OBJECT_HAS_LEASE",
    TRANSFER_FAIL: "TRANSFER_FAIL",
    SEGMENT_NOT_FOUND: "SEGMENT_NOT_FOUND",
    RPC_FAIL: "RPC_FAIL",
    RPC_TIMEOUT: "RPC_TIMEOUT",
}
_RPC_TIMEOUT_VARIABLE = "MC_RPC_TIMEOUT_MS"
"""The client's timeout of a call to the master (30 s unless set); the tier's ``timeout`` sets it unless the operator did."""
_LOG_LEVEL_VARIABLE = "MC_LOG_LEVEL"
"""The least level of the client's own log lines on standard error (``INFO`` unless set: 18 lines a
start); the tier's ``client_log_level`` sets it unless the operator did."""


class MooncakeStore(Protocol):
    """The calls the tier makes on ``mooncake.store.MooncakeDistributedStore``; one client serves every thread."""

    def setup(
        self,
        local_hostname: str,
        metadata_server: str,
        global_segment_size: int,
        local_buffer_size: int,
        protocol: str,
        rdma_devices: str,
        master_server_addr: str,
    ) -> int: ...

    def register_buffer(self, buffer_ptr: int, size: int) -> int: ...

    def unregister_buffer(self, buffer_ptr: int) -> int: ...

    def batch_put_from(
        self, keys: list[str], buffer_ptrs: list[int], sizes: list[int], config: object = ...
    ) -> list[int]: ...

    def batch_get_into(self, keys: list[str], buffer_ptrs: list[int], sizes: list[int]) -> list[int]: ...

    def batch_put_from_multi_buffers(
        self, keys: list[str], all_buffer_ptrs: list[list[int]], all_sizes: list[list[int]], config: object
    ) -> list[int]: ...

    def batch_get_into_multi_buffers(
        self, keys: list[str], all_buffer_ptrs: list[list[int]], all_sizes: list[list[int]]
    ) -> list[int]: ...

    def batch_is_exist(self, keys: list[str]) -> list[int]: ...

    def batch_remove(self, keys: list[str], force: bool = False) -> list[int]: ...

    def get_size(self, key: str, /) -> int: ...

    def health_check(self) -> int: ...

    def close(self) -> int: ...


class MooncakeUnavailableError(ConnectionError):
    """The Mooncake master or metadata server a tier was configured with cannot be reached; the message is one line."""


class MasterFaultError(ConnectionError):
    """A call the master did not answer, by the client's result code (one of :data:`MASTER_FAULTS`)."""

    def __init__(self, code: int) -> None:
        super().__init__(describe_code(code))
        self.code: int = code


@dataclass(frozen=True, slots=True)
class MooncakeClientOptions:
    """What Mooncake's client is set up with, one value from the config to :func:`connect`.

    ``master`` (``host:port``), ``metadata_server`` (an HTTP URL, or ``P2PHANDSHAKE``),
    ``protocol`` (``tcp`` or ``rdma``) with its ``devices``, ``local_hostname`` (the address
    other clients reach this one at), ``global_segment_size`` (bytes this process lends the
    store), ``local_buffer_size`` and ``replicas`` go to the client's setup; ``timeout``
    (seconds) bounds a call to the master; ``client_log_level`` (``INFO``, ``WARNING``, ``ERROR``)
    is the least level of the client's own log lines.
    """

    master: str = "127.0.0.1:50051"
    metadata_server: str = "http://127.0.0.1:8080/metadata"
    protocol: str = "tcp"
    devices: str = ""
    local_hostname: str = "127.0.0.1"
    global_segment_size: int = 1 << 30
    local_buffer_size: int = 256 << 20
    replicas: int = 1
    timeout: float = 5.0
    client_log_level: str = "WARNING"


DEFAULT_CLIENT = MooncakeClientOptions()
"""A client of a store on this machine's default ports, lending it 1 GiB."""


@dataclass(frozen=True, slots=True)
class MooncakeConnection:
    """A client set up against the master, and the replication settings of every put."""

    store: MooncakeStore
    put_config: object


def describe_code(code: int) -> str:
    """A client's result code by its Mooncake name, e.g. ``RPC_FAIL (-900)``."""
    return f"{_NAMES.get(code, 'error')} ({code})"


def connect(options: MooncakeClientOptions) -> MooncakeConnection:
    """A client that has mounted ``global_segment_size`` bytes of this process into the store.

    Raises :class:`MooncakeUnavailableError` when the master or the metadata server does not
    answer, and ``ImportError`` naming the extra when the client is not installed.
    """
    os.environ.setdefault(_LOG_LEVEL_VARIABLE, options.client_log_level)  # read when the client's library loads
    try:
        client = importlib.import_module("mooncake.store")
    except ImportError:
        raise MissingExtraError(MISSING_EXTRA, extra="mooncake") from None
    master, metadata_server, timeout = options.master, options.metadata_server, options.timeout
    _reachable("master", master, timeout)
    if metadata_server != P2P_HANDSHAKE:
        address = urlsplit(metadata_server)
        _reachable("metadata server", f"{address.hostname}:{address.port or 80}", timeout, metadata_server)
    if _RPC_TIMEOUT_VARIABLE not in os.environ:
        os.environ[_RPC_TIMEOUT_VARIABLE] = str(max(1, round(timeout * 1000)))
    store: MooncakeStore = client.MooncakeDistributedStore()
    code = store.setup(
        options.local_hostname,
        metadata_server,
        options.global_segment_size,
        options.local_buffer_size,
        options.protocol,
        options.devices,
        master,
    )
    if code != OK:
        raise MooncakeUnavailableError(
            f"Mooncake tier: the client's setup against master {master} and metadata server {metadata_server} "
            f"failed ({describe_code(code)}); check local_hostname, protocol and devices, or set "
            "start_degraded: true to start without the store"
        )
    put_config = client.ReplicateConfig()
    put_config.replica_num = options.replicas
    return MooncakeConnection(store, put_config)


def _reachable(what: str, address: str, timeout: float, shown: str | None = None) -> None:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return
    except (OSError, ValueError) as error:
        raise MooncakeUnavailableError(
            f"Mooncake tier: cannot reach the {what} at {shown or address} ({type(error).__name__}: {error}); "
            "start mooncake_master (and its metadata server), fix the address, or set start_degraded: true "
            "to start without it"
        ) from None
