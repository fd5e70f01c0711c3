"""The loader's diagnostic build flags (gpu/cuda/kernels ``_defines``): what each setting
compiles in, and a clear error for a bad value; CPU only (nothing is compiled)."""

from __future__ import annotations

import pytest

from gpu.cuda.kernels import _defines
from gpu.exceptions import BackendError

FLAGS = ("CSM_CUDA_PROBES", "CSM_CUDA_LINEINFO", "CSM_CUDA_NO_LAUNCH_FRONT",
         "CSM_CUDA_MATCH_BLOCKS", "CSM_CUDA_INTERSECT_ILP", "CSM_CUDA_ILP_MIN")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in FLAGS:
        monkeypatch.delenv(var, raising=False)


def test_no_settings_compile_the_default_build() -> None:
    assert _defines() == ()


def test_each_setting_adds_its_define(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CSM_CUDA_NO_LAUNCH_FRONT", "1")
    monkeypatch.setenv("CSM_CUDA_PROBES", "0")   # only "1" turns a switch on
    monkeypatch.setenv("CSM_CUDA_MATCH_BLOCKS", "6")
    monkeypatch.setenv("CSM_CUDA_INTERSECT_ILP", "2")
    monkeypatch.setenv("CSM_CUDA_ILP_MIN", "0")   # (0 is a value here: every list)
    assert _defines() == ("-DCSM_NO_LAUNCH_FRONT", "-DMATCH_BLOCKS=6", "-DINTERSECT_ILP=2",
                          "-DILP_MIN=0")


@pytest.mark.parametrize(("var", "value"), [("CSM_CUDA_MATCH_BLOCKS", "17"),
                                            ("CSM_CUDA_MATCH_BLOCKS", "0"),
                                            ("CSM_CUDA_INTERSECT_ILP", "x"),
                                            ("CSM_CUDA_INTERSECT_ILP", "9"),
                                            ("CSM_CUDA_ILP_MIN", "-1")])
def test_a_bad_value_names_the_setting(monkeypatch: pytest.MonkeyPatch, var: str,
                                       value: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(BackendError, match=var):
        _defines()


def _enum(src: str, first: str) -> list[str]:
    """The names of the C enum that starts with ``first``."""
    body = src[src.index(f"enum {{ {first} = 0"):]
    body = body[:body.index("}")]
    return [w.split("=")[0].strip() for w in body[len("enum {"):].split(",") if w.strip()]


def _define(src: str, name: str) -> str:
    line = next(x for x in src.splitlines() if x.startswith(f"#define {name} "))
    return line.split(None, 2)[2].split("//")[0].strip()


def test_the_kernels_agree_on_the_words_they_share() -> None:
    """match.cu and update.cu are compiled apart (no shared header: CuPy's cache key is
    each source's text), so the launch's device words and the per-query words each file
    spells out must be the same lists, and the pipeline's sizes must match them."""
    from pathlib import Path

    from gpu.cuda import _pipeline
    from gpu.cuda.kernels import QUERY_WORDS

    root = Path(_pipeline.__file__).parent / "kernels"
    match, update = (root / "match.cu").read_text(), (root / "update.cu").read_text()
    words = _enum(match, "D_PAIRS")
    assert words == _enum(update, "D_PAIRS")
    assert [getattr(_pipeline, w) for w in words] == list(range(len(words)))
    assert _define(match, "Q_EACH") == "(3 * Q_LINE)" and _define(match, "Q_LINE") == "32"
    assert _define(update, "Q_EACH") == "(3 * 32)" and QUERY_WORDS == 3 * 32
    assert _define(match, "QE_COLLECTED") == "(2 * Q_LINE)"
    assert _define(update, "QE_COLLECTED") == "(2 * 32)"
