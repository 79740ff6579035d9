"""The revision an engine's identity takes from its model directory: other weights at one path are another identity."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvcontract.integrations.model_files import model_revision
from tests.integrations.support import save_model


def test_the_same_files_are_the_same_revision_in_any_folder(tmp_path: Path) -> None:
    first = save_model(tmp_path / "a", seed=1)
    copy = shutil.copytree(first, tmp_path / "b")
    assert model_revision(str(first)).startswith("files:")
    assert model_revision(str(first)) == model_revision(str(copy))


def test_other_weights_of_the_same_shape_at_one_path_are_another_revision(tmp_path: Path) -> None:
    path = tmp_path / "model"
    before = model_revision(str(save_model(path, seed=1)))
    assert model_revision(str(save_model(path, seed=2))) != before


def test_another_config_is_another_revision(tmp_path: Path) -> None:
    assert model_revision(str(save_model(tmp_path / "a", seed=1))) != model_revision(
        str(save_model(tmp_path / "b", seed=1, layers=3))
    )


def test_files_that_are_neither_config_nor_weights_do_not_count(tmp_path: Path) -> None:
    path = save_model(tmp_path / "model", seed=1)
    before = model_revision(str(path))
    (path / "README.md").write_text("a model card, edited")
    assert model_revision(str(path)) == before


def test_a_hub_name_is_its_local_snapshot_s_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "models--org--tiny"
    save_model(repo / "snapshots" / commit, seed=1)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    assert model_revision("org/tiny") == f"hub:{commit}"
    assert model_revision("org/absent") == ""
