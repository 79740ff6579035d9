"""What the engine integrations' tests share: the methods an adapter overrides, model folders as engines find them."""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from pathlib import Path


def engine_methods(adapter: type) -> dict[str, Callable[..., object]]:
    """The public methods ``adapter``'s engine bases define, each from the nearest base: what it overrides."""
    methods: dict[str, Callable[..., object]] = {}
    for base in adapter.__mro__[1:]:
        for name, member in vars(base).items():
            function = getattr(member, "__func__", member)
            if isinstance(function, types.FunctionType) and not name.startswith("_"):
                methods.setdefault(name, function)
    return methods


def save_model(directory: Path, seed: int, *, layers: int = 2, size: int = 1 << 20) -> Path:
    """A model folder as ``save_pretrained`` leaves it: a config, one safetensors file of ``size`` bytes of weights."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": layers}))
    header = json.dumps({"weight": {"dtype": "F32", "shape": [size // 4], "data_offsets": [0, size]}}).encode()
    weights = bytes((seed * 7919 + i * 31) % 251 for i in range(size))
    (directory / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + weights)
    return directory
