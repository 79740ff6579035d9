"""Callers that break the Sequence / Iterable contract or pass wrong values."""

from __future__ import annotations

from kvcontract.enforce import checked
from kvcontract import OffloadingManager, TransferResult
from typecheck.fail._fixtures import ctx, key, keys, manager

manager.prepare_store((k for k in keys), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
manager.touch({key}, ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
manager.touch({key: 1}.keys(), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
manager.prepare_load(iter(keys), ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
manager.lookup(b"raw bytes are not an OffloadKey", ctx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
manager.complete_store(keys, ctx, success="yes")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
manager.lookup(key, "request-0")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
label: str = ctx.get_state(str)  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]
same: int = checked(manager, OffloadingManager)  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]
TransferResult(job_id=1)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
