"""The core test suite on the other Python versions the package supports: ``nox -s tests``.

CI (``.ci/run``) runs everything on one Python; these sessions run the README's test command,
without Redis and vLLM, on 3.12 (3.11 is what CI runs; 3.11 is the floor, see CONTRIBUTING.md). torch is installed
first from a CPU-only source, never from PyPI, whose Linux wheels are CUDA builds:
``KVCONTRACT_TORCH_INDEX`` (default PyTorch's CPU index) or ``KVCONTRACT_TORCH_WHEELS``, a
directory holding ``torch-2.13.0+cpu`` wheels for each version (torch's own dependencies come
from the usual index).
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["tests"]

TORCH = "torch==2.13.0+cpu"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@nox.session(python=["3.12"])
def tests(session: nox.Session) -> None:
    """The README's test command, Redis and vLLM tests skipped as on any machine without them."""
    wheels = os.environ.get("KVCONTRACT_TORCH_WHEELS")
    source = (
        ["--find-links", wheels] if wheels else ["--index-url", os.environ.get("KVCONTRACT_TORCH_INDEX", CPU_INDEX)]
    )
    session.install(TORCH, *source)  # the +cpu label matches no CUDA wheel on PyPI
    session.run("python", "-c", "import torch; assert torch.version.cuda is None, torch.__version__")
    session.install("-e", ".[testing,plot,metrics]", "--config-settings", "editable_mode=compat")
    session.run("python", "-m", "pytest", "-q", *session.posargs)
