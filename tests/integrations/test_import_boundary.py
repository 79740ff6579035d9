"""``import kvcontract`` stays free of the engines it integrates with."""

from __future__ import annotations

import subprocess
import sys


def test_import_kvcontract_does_not_import_vllm() -> None:
    code = "import sys, kvcontract, kvcontract.integrations; print(sorted(m for m in sys.modules if m.split('.')[0] == 'vllm'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_import_kvcontract_does_not_import_sglang() -> None:
    code = "import sys, kvcontract, kvcontract.integrations; print(sorted(m for m in sys.modules if m.split('.')[0] == 'sglang'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
