"""The loader's diagnostic build flags (gpu/cuda/kernels ``_defines``): what each setting
compiles in, and a clear error for a bad value; CPU only (nothing is compiled)."""

from __future__ import annotations

import pytest

from gpu.cuda.kernels import _defines
from gpu.exceptions import BackendError

FLAGS = ("CSM_CUDA_PROBES", "CSM_CUDA_LINEINFO", "CSM_CUDA_NO_LAUNCH_FRONT",
         "CSM_CUDA_FUSED_TAIL", "CSM_CUDA_MATCH_BLOCKS", "CSM_CUDA_TAIL_SHORT",
         "CSM_CUDA_INTERSECT_ILP", "CSM_CUDA_PAIRED_RANGE")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in FLAGS:
        monkeypatch.delenv(var, raising=False)


def test_no_settings_compile_the_default_build() -> None:
    assert _defines() == ()


def test_each_setting_adds_its_define(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CSM_CUDA_FUSED_TAIL", "1")
    monkeypatch.setenv("CSM_CUDA_PROBES", "0")   # only "1" turns a switch on
    monkeypatch.setenv("CSM_CUDA_PAIRED_RANGE", "1")
    monkeypatch.setenv("CSM_CUDA_MATCH_BLOCKS", "6")
    monkeypatch.setenv("CSM_CUDA_TAIL_SHORT", "4")
    monkeypatch.setenv("CSM_CUDA_INTERSECT_ILP", "2")
    assert _defines() == ("-DCSM_FUSED_TAIL", "-DCSM_PAIRED_RANGE", "-DMATCH_BLOCKS=6",
                          "-DTAIL_SHORT=4", "-DINTERSECT_ILP=2")


@pytest.mark.parametrize(("var", "value"), [("CSM_CUDA_MATCH_BLOCKS", "17"),
                                            ("CSM_CUDA_MATCH_BLOCKS", "0"),
                                            ("CSM_CUDA_TAIL_SHORT", "x"),
                                            ("CSM_CUDA_TAIL_SHORT", "257"),
                                            ("CSM_CUDA_INTERSECT_ILP", "9")])
def test_a_bad_value_names_the_setting(monkeypatch: pytest.MonkeyPatch, var: str,
                                       value: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(BackendError, match=var):
        _defines()
