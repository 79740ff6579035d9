"""A real Mooncake Store on loopback ports for the Mooncake tier tests (master, metadata server, a segment), and tiers on it.

``mooncake_master`` and the HTTP metadata server (``mooncake.http_metadata_server``) both
ship in the client's package; they listen on 127.0.0.1 only. A third process lends the
store its memory (a client that mounts ``SEGMENT_BYTES`` and waits), so the tiers under
test lend none and what they stored outlives them, as with a store that engines share.
"""

from __future__ import annotations

import importlib.util
import os
import select
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch

from kvcontract import BlockIdentity
from kvcontract.testing import example_identity
from kvcontract.tiers import MooncakeTier
from kvcontract.tiers.mooncake import client as mooncake_client
from kvcontract.tiers.remote_tier import RemoteTierOptions
from tests.required_parts import skip_unless_required
from tests.tiers.redis.support import HOST, free_port
from tests.tiers.support import EVENTS_ON

SEGMENT_BYTES = 64 << 20
"""Memory the segment process lends the store, unless told otherwise."""
_START_LIMIT_S = 30.0
"""Guards against a hang only: the master answers in about a second."""
RPC_TIMEOUT_MS = "500"
"""The client's timeout of a call to the master in the tests (``MC_RPC_TIMEOUT_MS``), so a stalled master costs half a second."""

_SEGMENT_SCRIPT = """
import sys
from mooncake.store import MooncakeDistributedStore
store = MooncakeDistributedStore()
code = store.setup(sys.argv[1], sys.argv[2], int(sys.argv[3]), 16 << 20, "tcp", "", sys.argv[4])
print("ready" if code == 0 else f"setup failed: {code}", flush=True)
sys.stdin.read()
store.close()
"""


def missing_reason() -> str | None:
    """Why the Mooncake tests cannot run here (no client, no master binary), or ``None``."""
    if importlib.util.find_spec("mooncake") is None or importlib.util.find_spec("mooncake.store") is None:
        return "Mooncake's client is not installed (pip install 'kvcontract[mooncake]'; Debian needs libibverbs1)"
    if master_path() is None:
        return "mooncake_master is not on PATH (it comes with the mooncake-transfer-engine-non-cuda package)"
    return None


def store_or_skip(directory: Path) -> MooncakeStore:
    """A store (master, metadata server, segment) working in ``directory``, or a skip (a failure under ``KVCONTRACT_REQUIRE=mooncake``) without Mooncake."""
    reason = missing_reason()
    if reason is not None:
        skip_unless_required("mooncake", reason)
    return MooncakeStore(directory)


def master_path() -> str | None:
    """``mooncake_master`` of this interpreter's environment, or on PATH."""
    beside = Path(sys.executable).parent / "mooncake_master"
    return str(beside) if beside.exists() else shutil.which("mooncake_master")


@runtime_checkable
class RawStore(mooncake_client.MooncakeStore, Protocol):
    """What the tests and the benchmark call on a plain client of the store, beside what the tier calls."""

    def upsert(self, key: str, value: bytes) -> int: ...

    def get(self, key: str) -> bytes: ...

    def remove(self, key: str, force: bool = False) -> int: ...

    def is_exist(self, key: str) -> int: ...

    def remove_all(self, force: bool = False) -> int: ...


class MooncakeStore:
    """``mooncake_master``, its HTTP metadata server and one segment process on free loopback ports."""

    def __init__(
        self,
        workdir: Path,
        *,
        port: int | None = None,
        metadata_port: int | None = None,
        segment_bytes: int = SEGMENT_BYTES,
        lease_ms: int = 2000,
    ) -> None:
        os.environ.setdefault("MC_RPC_TIMEOUT_MS", RPC_TIMEOUT_MS)
        self.segment_bytes = segment_bytes
        self.lease_ms = lease_ms
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = port if port is not None else free_port()
        self.metrics_port = free_port()
        self.metadata_port = metadata_port if metadata_port is not None else free_port()
        self._master: subprocess.Popen[bytes] | None = None
        self._segment: subprocess.Popen[str] | None = None
        self._metadata = self._spawn(
            [sys.executable, "-m", "mooncake.http_metadata_server", "--host", HOST, "--port", str(self.metadata_port)],
            "metadata.log",
        )
        try:
            self._wait_listening(self.metadata_port, self._metadata)
            self.start()
            self._start_segment()
            self._probe = self.raw()
            self.wait_ready()
        except BaseException:
            self._stop_processes()
            raise

    @property
    def master(self) -> str:
        """``127.0.0.1:<port>`` of the master."""
        return f"{HOST}:{self.port}"

    @property
    def metadata_server(self) -> str:
        """The metadata server's URL."""
        return f"http://{HOST}:{self.metadata_port}/metadata"

    def client(self, timeout: float = 5.0) -> mooncake_client.MooncakeClientOptions:
        """Options of a client that reaches this store and lends it no memory, its calls to the master bounded by ``timeout``."""
        return mooncake_client.MooncakeClientOptions(
            master=self.master,
            metadata_server=self.metadata_server,
            local_hostname=HOST,
            global_segment_size=0,
            local_buffer_size=16 << 20,
            timeout=timeout,
        )

    def tier_config(self) -> dict[str, object]:
        """A ``kind: mooncake`` tier config that reaches this store, lending it no memory of the tier's own."""
        return {
            "kind": "mooncake",
            "master": self.master,
            "metadata_server": self.metadata_server,
            "global_segment_size": 0,
            "local_buffer_size": 16 << 20,
        }

    def simulation_config(self, namespace: str) -> dict[str, object]:
        """A tiering config of the `tiny` layout with a small host memory over one Mooncake tier on this store."""
        return {
            "kv_layout": {"preset": "tiny", "block_tokens": 16, "offload_block_tokens": 16},
            "manager": {
                "kind": "tiering",
                "primary": {"kind": "cpu", "capacity": 64, "policy": {"kind": "lru"}},
                "secondary": [{**self.tier_config(), "namespace": namespace, "lookup_timeout": 5.0}],
            },
        }

    def raw(self) -> RawStore:
        """A plain client of the store that lends it nothing, set up by the tier's own :func:`~kvcontract.tiers.mooncake.client.connect`."""
        raw = mooncake_client.connect(self.client(timeout=_START_LIMIT_S)).store
        assert isinstance(raw, RawStore), f"{type(raw).__name__} lacks a call of RawStore"
        return raw

    def start(self) -> None:
        """Start the master and wait until its RPC port answers."""
        master = master_path()
        assert master is not None, "mooncake_master is not on PATH"
        self._master = self._spawn(
            [
                master,
                f"--rpc_port={self.port}",
                f"--rpc_address={HOST}",
                f"--metrics_port={self.metrics_port}",
                f"--metrics_host={HOST}",
                f"--default_kv_lease_ttl={self.lease_ms}",
                "--client_ttl=2",
            ],
            "master.log",
        )
        self._wait_listening(self.port, self._master)

    def stop(self) -> None:
        """Stop the master: every object it placed is gone with it."""
        if self._master is not None and self._master.poll() is None:
            self._master.terminate()
            self._master.wait(timeout=_START_LIMIT_S)
        self._master = None

    def restart(self) -> None:
        """Stop the master and start it again on the same port, empty; returns once the segment is mounted again."""
        self.stop()
        self.start()
        self.wait_ready()

    def wait_ready(self) -> None:
        """Wait until the store takes a value: the master serves and a segment is mounted."""
        deadline = time.monotonic() + _START_LIMIT_S
        while self._probe.upsert("kvcontract-tests:probe", b"ready") != 0:
            assert time.monotonic() < deadline, "the store never took a value"
            time.sleep(0.05)

    def stall(self) -> None:
        """Freeze the master (SIGSTOP): calls to it time out until :meth:`resume`."""
        assert self._master is not None
        self._master.send_signal(19)

    def resume(self) -> None:
        """Let a stalled master run again (SIGCONT)."""
        assert self._master is not None
        self._master.send_signal(18)

    def stall_segment(self) -> None:
        """Freeze the process that lends the store its memory (SIGSTOP): transfers of its values wait until :meth:`resume_segment`."""
        assert self._segment is not None
        self._segment.send_signal(19)

    def resume_segment(self) -> None:
        """Let a stalled segment process run again (SIGCONT)."""
        assert self._segment is not None
        self._segment.send_signal(18)

    def close(self) -> None:
        """Stop the segment process, the master and the metadata server."""
        self._probe.close()
        self._stop_processes()

    def _stop_processes(self) -> None:
        """Stop whichever of the segment process, the master and the metadata server run, and close this side's pipes."""
        self._stop_segment()
        self.stop()
        if self._metadata.poll() is None:
            self._metadata.terminate()
        self._metadata.wait(timeout=_START_LIMIT_S)

    def _start_segment(self) -> None:
        command = [
            sys.executable,
            "-c",
            _SEGMENT_SCRIPT,
            HOST,
            self.metadata_server,
            str(self.segment_bytes),
            self.master,
        ]
        # The child gets its own copy of the log's descriptor; this process closes its copy on leaving the block.
        with open(self.workdir / "segment.log", "w", encoding="utf-8") as log:
            self._segment = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        assert self._segment.stdout is not None
        answered, _, _ = select.select([self._segment.stdout], [], [], _START_LIMIT_S)
        assert answered, f"the segment process said nothing in {_START_LIMIT_S} s (see {self.workdir / 'segment.log'})"
        line = self._segment.stdout.readline().strip()
        assert line == "ready", f"the segment process did not start: {line!r} (see {self.workdir / 'segment.log'})"

    def _stop_segment(self) -> None:
        """End the segment process (end of its stdin lets it close its store), killing it past the limit, and close both pipes."""
        segment, self._segment = self._segment, None
        if segment is None:
            return
        assert segment.stdin is not None and segment.stdout is not None
        segment.stdin.close()
        try:
            segment.wait(timeout=_START_LIMIT_S)
        except subprocess.TimeoutExpired:
            segment.kill()
            segment.wait(timeout=_START_LIMIT_S)
        segment.stdout.close()

    def _spawn(self, command: list[str], log_name: str) -> subprocess.Popen[bytes]:
        with open(self.workdir / log_name, "ab") as log:
            return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    @staticmethod
    def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + _START_LIMIT_S
        while True:
            try:
                with socket.create_connection((HOST, port), timeout=1.0):
                    return
            except OSError:
                pass
            assert process.poll() is None, f"{process.args!r} exited at start"
            assert time.monotonic() < deadline, f"nothing listens on port {port}"
            time.sleep(0.02)


class MakeTier(Protocol):
    """Builds a tier on the session's store in the test's namespace, unless told otherwise."""

    def __call__(
        self,
        *,
        namespace: str | None = None,
        host_blocks: torch.Tensor | None = None,
        identity: BlockIdentity | None = None,
        lookup_timeout: float = 10.0,
        io_threads: int = 2,
        start_degraded: bool = False,
        integrity_key: bytes | None = None,
        options: RemoteTierOptions = EVENTS_ON,
        master: str | None = None,
    ) -> MooncakeTier: ...


def tier_on(
    store: MooncakeStore,
    host: torch.Tensor,
    *,
    namespace: str | None = None,
    identity: BlockIdentity | None = None,
    lookup_timeout: float = 10.0,
    io_threads: int = 2,
    start_degraded: bool = False,
    master: str | None = None,
    metadata_server: str | None = None,
    integrity_key: bytes | None = None,
    options: RemoteTierOptions = EVENTS_ON,
    timeout: float = 1.0,
) -> MooncakeTier:
    """A tier on ``store`` (or the given addresses) over ``host`` that lends the store no memory, of the example identity unless told."""
    return MooncakeTier(
        host,
        identity=identity if identity is not None else example_identity(int(host.shape[1])),
        client=replace(
            store.client(timeout),
            master=master if master is not None else store.master,
            metadata_server=metadata_server if metadata_server is not None else store.metadata_server,
        ),
        integrity_key=integrity_key,
        options=replace(
            options,
            namespace=namespace,
            lookup_timeout=lookup_timeout,
            io_threads=io_threads,
            retry_interval=0.05,
            start_degraded=start_degraded,
        ),
    )
