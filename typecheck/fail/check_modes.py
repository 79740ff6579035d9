"""Misuse of the runtime-check switches: modes are keyword flags and a closed set of names."""

from __future__ import annotations

from kvcontract.enforce import CheckMode, configure

configure(True)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
configure(checks="off")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
configure(full="full")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
configure(sampled=True)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
mode: CheckMode = "linear"  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]
