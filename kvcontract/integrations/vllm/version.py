"""Which vLLM releases the adapters support, checked once when the package is imported.

vLLM's offloading interfaces change between minor releases. The adapters support the two
newest minor releases at once (a policy, see docs/vllm.md), so a user can upgrade vLLM and
kvcontract in either order; any other release is refused with one line naming both sides.
"""

from __future__ import annotations

from importlib import metadata

from kvcontract.extras import MissingExtraError

__all__ = ["SUPPORTED_VLLM", "UnsupportedVLLMError", "check_vllm_version"]

SUPPORTED_VLLM: tuple[str, ...] = ("0.34", "0.33")
"""The vLLM minor releases the adapters are written and tested for (any 0.34.x or 0.33.x), newest first."""

_SUPPORTED = " and ".join(f"{release}.x" for release in SUPPORTED_VLLM)


class UnsupportedVLLMError(MissingExtraError):
    """vLLM is missing, or its version is not one the adapters support."""


def check_vllm_version(version: str | None = None) -> str:
    """The installed vLLM version (or ``version``), if it is a supported one; otherwise raise."""
    if version is None:
        try:
            version = metadata.version("vllm")
        except metadata.PackageNotFoundError:
            raise UnsupportedVLLMError(
                f"kvcontract.integrations.vllm needs vLLM {_SUPPORTED}, which is not installed: "
                "pip install 'kvcontract[vllm]' on a GPU machine (vLLM with its own torch), or "
                "requirements/vllm.txt then vLLM --no-deps for a CPU-only test setup",
                extra="vllm",
            ) from None
    release = ".".join(version.split("+")[0].split(".")[:2])
    if release not in SUPPORTED_VLLM:
        raise UnsupportedVLLMError(
            f"kvcontract.integrations.vllm supports vLLM {_SUPPORTED}, found vLLM {version}: "
            f"pip install 'vllm=={SUPPORTED_VLLM[0]}.*' or a kvcontract release made for vLLM {release}",
            extra="vllm",
        )
    return version
