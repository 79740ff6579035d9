"""Which SGLang releases the HiCache backend supports, checked once when the package is imported.

SGLang's HiCache storage interface (``HiCacheStorage``, its v1 calls, the host pools' layouts)
changes between releases, so the backend names the range it is tested against and refuses
any other with one line naming both.
"""

from __future__ import annotations

from importlib import metadata

__all__ = ["SUPPORTED_SGLANG", "UnsupportedSGLangError", "check_sglang_version"]

SUPPORTED_SGLANG: str = ">=0.5.23,<0.6"
"""The SGLang releases the backend is written and tested for (0.5.23 and later 0.5.x)."""
_OLDEST = (0, 5, 23)
_RELEASE = (0, 5)


class UnsupportedSGLangError(ImportError):
    """SGLang is missing, or its version is not one the backend supports."""


def check_sglang_version(version: str | None = None) -> str:
    """The installed SGLang version (or ``version``), if it is a supported one; otherwise raise."""
    if version is None:
        try:
            version = metadata.version("sglang")
        except metadata.PackageNotFoundError:
            raise UnsupportedSGLangError(
                "kvcontract.integrations.sglang needs SGLang, which is not installed: "
                f"pip install 'kvcontract[sglang]' (SGLang {SUPPORTED_SGLANG})"
            ) from None
    parts = [int(part) if part.isdigit() else -1 for part in version.split("+")[0].split(".")[:3]]
    numbers = tuple(parts + [0] * (3 - len(parts)))
    if numbers[:2] != _RELEASE or numbers < _OLDEST:
        raise UnsupportedSGLangError(
            f"kvcontract.integrations.sglang supports SGLang {SUPPORTED_SGLANG}, found SGLang {version}: "
            f"pip install 'sglang{SUPPORTED_SGLANG}' or a kvcontract release made for SGLang {version}"
        )
    return version
