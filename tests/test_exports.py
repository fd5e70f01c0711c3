"""Each package's __all__ is exactly its public surface."""

import importlib

import pytest


@pytest.mark.parametrize("name", ["gpu", "gpu.graph", "gpu.planning", "gpu.cpu", "gpu.cuda",
                                  "gpu.ooc", "streams"])
def test_all_matches_public_names(name: str) -> None:
    mod = importlib.import_module(name)
    public = {n for n in dir(mod) if not n.startswith("_")
              and not isinstance(getattr(mod, n), type(mod))}
    assert set(mod.__all__) == public
