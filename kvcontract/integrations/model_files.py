"""What a model directory holds, as a revision string an engine's block identity can carry.

An engine that names no revision (vLLM passes none to its offloading backends; a local path
has none) would otherwise share blocks between the old and the new weights saved at one path:
a fine-tune written over its base, another revision downloaded to the same folder. The
fingerprint reads what is cheap and still changes with the weights: the config files whole,
and of each weight file its size, its header (a safetensors file's tensor table) and 64
samples of 4 KiB spread over the file. That is at most a few hundred KiB a file, whatever the
model's size; new weights of the same shape change the samples. Weights changed where no
file shows it (a loader that transforms them) need ``identity.revision``.

A hub model name (``org/model``) resolves to the commit of its local snapshot, when
``huggingface_hub`` has one; otherwise there is no revision to add.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

__all__ = ["model_revision"]

_log = logging.getLogger(__name__)

CONFIG_FILES = ("config.json", "generation_config.json", "params.json")
"""Files read whole: what the model computes with, besides its weights."""
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".npz")
"""Files sampled: the weights."""
SAMPLES = 64
SAMPLE_BYTES = 4096
HEADER_LIMIT = 16 << 20
"""A safetensors header longer than this is read only this far (real ones are KiB)."""


def model_revision(model: str) -> str:
    """``files:<digest>`` of what the directory ``model`` holds, ``hub:<commit>`` of a hub snapshot, or ``""``."""
    directory = Path(model)
    if directory.is_dir():
        return f"files:{directory_fingerprint(directory)}"
    commit = _hub_commit(model)
    return f"hub:{commit}" if commit else ""


def directory_fingerprint(directory: Path) -> str:
    """32 hex digits that change when the config or the weights in ``directory`` change."""
    digest = hashlib.blake2b(digest_size=16)
    for path in sorted(directory.iterdir()):
        if not path.is_file():
            continue
        if path.name in CONFIG_FILES:
            digest.update(f"config {path.name}\n".encode())
            digest.update(path.read_bytes())
        elif path.suffix in WEIGHT_SUFFIXES:
            digest.update(f"weights {path.name}\n".encode())
            _sample(path, digest)
    return digest.hexdigest()


def _sample(path: Path, digest: hashlib.blake2b) -> None:
    """Size, header and evenly spread samples of the weight file ``path`` into ``digest``."""
    size = path.stat().st_size
    digest.update(size.to_bytes(8, "little"))
    with path.open("rb") as file:
        if path.suffix == ".safetensors" and size >= 8:
            length = int.from_bytes(file.read(8), "little")
            digest.update(file.read(min(length, HEADER_LIMIT)))
        step = max(size // SAMPLES, 1)
        for offset in range(0, size, step)[:SAMPLES]:
            file.seek(offset)
            digest.update(file.read(SAMPLE_BYTES))


def _hub_commit(model: str) -> str:
    """The commit of the local snapshot of the hub model ``model``, or ``""`` where there is none."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return ""
    try:
        found = try_to_load_from_cache(repo_id=model, filename="config.json")
    except Exception as error:
        _log.debug("kvcontract: %r is no hub model in the local cache: %s", model, error)
        return ""
    if not isinstance(found, str):
        return ""
    snapshot = Path(found).parent
    return snapshot.name if snapshot.parent.name == "snapshots" else ""
