"""Modules that moved into rooms (issue 28): an old path fails with one line naming the new one."""

from __future__ import annotations

import importlib

import pytest

from composer.errors import MOVED_MODULES, moved_module_error


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_every_new_path_imports(old):
    importlib.import_module(MOVED_MODULES[old])


@pytest.mark.parametrize("old", sorted(set(MOVED_MODULES) - {"composer.hybridize"}))
def test_an_old_path_fails_naming_the_new_one(old):
    with pytest.raises(ModuleNotFoundError) as caught:
        importlib.import_module(old)
    assert str(caught.value) == f"{old} moved to {MOVED_MODULES[old]} (issue 28: composer/ in rooms)"


def test_the_hybridize_room_names_where_its_functions_went():
    import composer.hybridize

    with pytest.raises(AttributeError, match=r"composer\.hybridize\.student\.freeze"):
        composer.hybridize.freeze  # noqa: B018


def test_other_missing_modules_keep_the_usual_error():
    assert moved_module_error("composer.nonsense") is None
    with pytest.raises(ModuleNotFoundError, match="No module named 'composer.nonsense'"):
        importlib.import_module("composer.nonsense")


def test_the_model_directory_functions_name_their_new_module():
    from composer.training import checkpoint

    with pytest.raises(AttributeError, match=r"composer\.interop\.model_dir\.load_pretrained"):
        checkpoint.load_pretrained  # noqa: B018
    import composer.training

    assert composer.training.load_pretrained.__module__ == "composer.interop.model_dir"  # README's path still works
