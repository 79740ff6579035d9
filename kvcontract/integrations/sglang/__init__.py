"""kvcontract's tiers as an SGLang HiCache storage backend.

SGLang loads it by module path: ``--hicache-storage-backend dynamic
--hicache-storage-backend-extra-config '{"backend_name": "kvcontract", "module_path":
"kvcontract.integrations.sglang", "class_name": "KVContractHiCacheStorage", "interface_v1": 1,
"kvcontract": {"tier": {...}}}'``. Importing this package checks the installed SGLang first
and fails with one line on a release it does not support.
"""

from kvcontract.integrations.sglang.version import SUPPORTED_SGLANG, UnsupportedSGLangError, check_sglang_version

check_sglang_version()

from kvcontract.integrations.sglang.storage import KVContractHiCacheStorage  # noqa: E402  (after the version check)

__all__ = ["SUPPORTED_SGLANG", "KVContractHiCacheStorage", "UnsupportedSGLangError", "check_sglang_version"]
