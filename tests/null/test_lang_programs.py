"""null tier: the tutorial (docs/programs.md) as it is written: its programs build, those
the lowering can take today compile (the others once it has the features they wait for),
some run on the pretend device, and what it shows of the API's output is what it prints."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from support.emulated import Device
from support.host import run
from support.lang import TUTORIAL, desc, requires_feature, tutorial

import tile_mlir.lang as tl

D = tl.ArrayDesc


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return tutorial(tmp_path_factory.mktemp("tutorial"))


ARGS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "vector_add": ((D("f32", (1 << 20,)),) * 3, {}),
    "add_any_length": ((D("f32", (1000,)),) * 3, {}),
    "scale_rows": ((D("f16", (64, 100)), 0.5, D("f16", (64, 100))), {}),
    "bias_add": ((D("f32", (12, 50)), D("f32", (50,)), D("f32", (12, 50))), {}),
    "reg_sqrt": ((D("f32", (32, 8)),) * 2, {}),
    "row_sums": ((D("f32", (4, 8)), D("f32", (4,))), {}),
    "softmax": ((D("f32", (8, 1000)),) * 2, {"CHUNKS": 4}),
    "rms_norm": ((D("f16", (8, 1000)), D("f16", (1000,)), D("f16", (8, 1000)), 1e-6), {}),
}
TODAY = ["vector_add", "add_any_length", "scale_rows", "bias_add", "reg_sqrt", "row_sums"]


@pytest.mark.parametrize("name", sorted(ARGS))
def test_every_program_builds(doc: ModuleType, name: str) -> None:
    args, kwargs = ARGS[name]
    text = getattr(doc, name).ir(*args, **kwargs)
    assert f"gpu.func @{name}" in text and "tile." in text


@pytest.mark.parametrize("name", TODAY)
def test_programs_compile(doc: ModuleType, name: str) -> None:
    args, kwargs = ARGS[name]
    kernel = getattr(doc, name)
    program = kernel.compile(kernel.signature(*args, **kwargs))
    assert ".entry " + name in program.ptx["kernels"]


@requires_feature("cross_warp_reduce", "copy_overlap", "broadcast")
def test_softmax_compiles(doc: ModuleType) -> None:
    args, kwargs = ARGS["softmax"]
    doc.softmax.compile(doc.softmax.signature(*args, **kwargs))


@requires_feature("cross_warp_reduce", "copy_overlap", "broadcast", "mixed")
def test_rms_norm_compiles(doc: ModuleType) -> None:
    args, kwargs = ARGS["rms_norm"]
    doc.rms_norm.compile(doc.rms_norm.signature(*args, **kwargs))


def test_the_persistent_softmax_meets_through_mailboxes(doc: ModuleType) -> None:
    """The cluster section's loop over rows: its two reductions post (st.async) and wait
    on mailboxes; no cluster barrier in its loop."""
    desc = tl.ArrayDesc("f32", (8, 1024))
    ptx = doc.softmax_rows.compile([desc, desc], chip="sm_90").ptx["kernels"]
    assert ptx.count("st.async.shared::cluster") == 2
    assert "barrier.cluster.arrive;" not in ptx and "ld.shared::cluster" not in ptx


def test_the_programs_that_wait_say_so(doc: ModuleType) -> None:
    """The features the tutorial waits for are the lowering's to add: its IR of them is
    what the features' contracts describe."""
    softmax = doc.softmax.ir(*ARGS["softmax"][0], **ARGS["softmax"][1])
    assert 'layout = #tile.layout<"S[1], R[256:1@tid]">' in softmax
    assert re.search(r'"tile.copy"\(%\w+, %\w+\) \{padding = 0xFFF0000000000000 : f64', softmax)
    assert '"tile.reduce"' in softmax and 'kind = "max"' in softmax
    norm = doc.rms_norm.ir(*ARGS["rms_norm"][0], **ARGS["rms_norm"][1])
    assert norm.count("scf.for") == 2 and "padding = 0.000000e+00 : f64" in norm


@pytest.mark.parametrize("n", [1, 2047, 2049, 5000])
def test_add_any_length_on_the_pretend_device(doc: ModuleType, n: int,
                                              rng: np.random.Generator) -> None:
    device = Device()
    a, b = rng.standard_normal((2, n)).astype(np.float32)
    x, y, z = device.array(a, offset=3), device.array(b), device.empty((n,), "f32")
    args = [desc(x), desc(y), desc(z)]
    run(doc.add_any_length.ir(*args), tl.cdiv(n, 2048), doc.add_any_length.arguments(*args),
        device.buffers)
    np.testing.assert_array_equal(z.numpy(), a + b)


def test_the_shown_specialization(doc: ModuleType) -> None:
    shown = next(line for line in TUTORIAL.read_text().splitlines()
                 if line.startswith("<add_any_length:"))
    x = D("f32", (1000,))
    assert repr(doc.add_any_length.signature(x, x, D("f32", (1000,), pointer=0x1004))) == shown


def test_the_shown_error(doc: ModuleType) -> None:
    with pytest.raises(tl.ProgramError) as info:
        doc.broken.ir(D("f32", (64,)))
    head, line, caret = str(info.value).splitlines()
    path = Path(doc.__file__ or "")
    assert head.startswith(f"{path}:") and head.endswith(
        "error: unknown elementwise op 'sqr' (did you mean 'sqrt'?)")
    shown = next(text for text in TUTORIAL.read_text().splitlines() if "my_kernels.py" in text)
    assert shown.endswith(head.split(":", 3)[3]) and line == "    tl.cta.sqr(x, x)"
    assert caret == "    ^"


def test_embedding(doc: ModuleType) -> None:
    assert doc.embed() == ["vector_add", "vector_add_1"]
