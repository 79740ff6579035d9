"""Which vLLM releases the adapters support, checked once when the package is imported.

vLLM's offloading interfaces change between minor releases, so the adapters pin the minor
release they are tested against and refuse any other with one line naming both.
"""

from __future__ import annotations

from importlib import metadata

__all__ = ["SUPPORTED_VLLM", "UnsupportedVLLMError", "check_vllm_version"]

SUPPORTED_VLLM: str = "0.33"
"""The vLLM minor release the adapters are written and tested for (any 0.33.x)."""


class UnsupportedVLLMError(ImportError):
    """vLLM is missing, or its version is not the one the adapters support."""


def check_vllm_version(version: str | None = None) -> str:
    """The installed vLLM version (or ``version``), if it is a supported one; otherwise raise."""
    if version is None:
        try:
            version = metadata.version("vllm")
        except metadata.PackageNotFoundError:
            raise UnsupportedVLLMError(
                "kvcontract.integrations.vllm needs vLLM, which is not installed: "
                f"pip install 'kvcontract[vllm]' (vLLM {SUPPORTED_VLLM}.x)"
            ) from None
    release = ".".join(version.split("+")[0].split(".")[:2])
    if release != SUPPORTED_VLLM:
        raise UnsupportedVLLMError(
            f"kvcontract.integrations.vllm supports vLLM {SUPPORTED_VLLM}.x, found vLLM {version}: "
            f"pip install 'vllm=={SUPPORTED_VLLM}.*' or a kvcontract release made for vLLM {release}"
        )
    return version
