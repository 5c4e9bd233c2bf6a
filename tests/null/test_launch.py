"""null tier: launches short of the driver (packing, streams, checks), binary choice, and
the runtime in a process where MLIR cannot be imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.cases import Case
from support.fakes import FakeDriver, FakeTensor, fake_torch

import tile_mlir
from tile_mlir.runtime import (
    ArgumentError,
    IncompatibleBinaryError,
    Kernel,
    KernelSpec,
    Param,
    arrays,
    binary,
    driver,
    stream_handle,
)

SPEC = KernelSpec("k", "m", (
    Param("x", "memref", "f32", (4, 256), writes=False, align=16),
    Param("s", "scalar", "f32"),
    Param("y", "memref", "f32", (4, 256), writes=True, align=16),
), block=(128, 1, 1), grid=(2, 1, 1))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeDriver, Any]]:
    """A fake driver and a fake torch, with a context 'current' on device 0."""
    drv = FakeDriver(SPEC)
    torch = fake_torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(driver, "cuda", lambda: drv)
    monkeypatch.setattr(driver, "context", lambda device=0: None)
    yield drv, torch


def _tensor(torch: Any, pointer: int, **kw: Any) -> FakeTensor:
    return FakeTensor(kw.pop("shape", (4, 256)), kw.pop("dtype", torch.float32), pointer, **kw)


def test_packs_pointers_and_scalars_on_torchs_stream(fake: tuple[FakeDriver, Any]) -> None:
    drv, torch = fake
    kernel = Kernel(SPEC, function="f")
    kernel(_tensor(torch, 0x1000), 2.5, _tensor(torch, 0x2000))
    torch.current[0] = 0x6000  # the caller switched streams
    kernel(_tensor(torch, 0x3000), -1.0, _tensor(torch, 0x4000))
    assert len(kernel._plans) == 1  # one plan for the signature, reused
    kernel(_tensor(torch, 0x3000), np.float32(0.5), _tensor(torch, 0x4000))
    first, second, third = drv.launches
    assert first.values == [0x1000, 2.5, 0x2000] and first.stream == 0x5000
    assert second.values == [0x3000, -1.0, 0x4000] and second.stream == 0x6000
    assert third.values == [0x3000, 0.5, 0x4000]
    assert first.grid == (2, 1, 1) and first.block == (128, 1, 1) and first.function == "f"


def test_generated_launcher_follows_the_signature(fake: tuple[FakeDriver, Any]) -> None:
    """The generated fast launcher serves its own argument types only: another
    signature, a wrong count or another thread takes the general path."""
    drv, torch = fake
    kernel = Kernel(SPEC, function="f")
    kernel(_tensor(torch, 0x1000), 1.0, _tensor(torch, 0x2000))
    first = kernel._fast
    kernel(_tensor(torch, 0x1100), 2.0, _tensor(torch, 0x2100))
    assert kernel._fast is first  # the same signature: the same launcher
    kernel(0x7000, 3.0, 0x8000)  # pointers: a plan and a launcher of their own
    assert kernel._fast is not first and len(kernel._plans) == 2
    with pytest.raises(ArgumentError, match="takes 3 arguments, got 2"):
        kernel(0x7000, 3.0)
    result: list[BaseException] = []

    def other_thread() -> None:
        try:
            kernel(0x9000, 4.0, 0xA000)
        except BaseException as e:  # noqa: BLE001 - carried to the test's thread
            result.append(e)

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert not result
    values = [launch.values for launch in drv.launches]
    assert values == [[0x1000, 1.0, 0x2000], [0x1100, 2.0, 0x2100], [0x7000, 3.0, 0x8000],
                      [0x9000, 4.0, 0xA000]]


def test_grid_per_call_takes_the_generated_launcher(fake: tuple[FakeDriver, Any]) -> None:
    """The op library sizes the grid per call; the kernel's known grid is the default."""
    drv, _ = fake
    spec = KernelSpec("k", "m", SPEC.params, block=(128, 1, 1), grid=None)
    kernel = Kernel(spec, function="f")
    with pytest.raises(ArgumentError, match="does not fix its grid size"):
        kernel(0x1000, 1.0, 0x2000)
    kernel(0x1000, 1.0, 0x2000, grid=(7,))
    fast = kernel._fast
    kernel(0x1100, 2.0, 0x2100, grid=(9, 2, 1))
    assert kernel._fast is fast
    assert [(launch.grid, launch.block) for launch in drv.launches] == [
        ((7, 1, 1), (128, 1, 1)), ((9, 2, 1), (128, 1, 1))]
    with pytest.raises(ArgumentError, match="does not fix its grid size"):
        kernel(0x1000, 1.0, 0x2000)  # still no default grid


def test_explicit_streams(fake: tuple[FakeDriver, Any]) -> None:
    drv, torch = fake
    kernel = Kernel(SPEC, function="f")
    args = (_tensor(torch, 0x1000), 1.0, _tensor(torch, 0x2000))

    class TorchStream:
        cuda_stream = 0x77

    class CupyStream:
        ptr = 0x88

    class ProtocolStream:
        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, 0x99)

    for stream in (0x66, TorchStream(), CupyStream(), ProtocolStream()):
        kernel(*args, stream=stream)
    assert [launch.stream for launch in drv.launches] == [0x66, 0x77, 0x88, 0x99]
    assert stream_handle(0) == 0


def test_pointers_and_buffers_launch_on_the_default_stream(
        fake: tuple[FakeDriver, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    drv, _ = fake

    class CaiArray:
        __cuda_array_interface__ = {"shape": (4, 256), "typestr": "<f4", "data": (0x8000, False),
                                    "strides": (1024, 4), "version": 3}

    monkeypatch.setattr(driver, "pointer_device", lambda pointer: 0)
    Kernel(SPEC, function="f")(CaiArray(), 1.0, 0x7000)
    assert drv.launches[0].values == [0x8000, 1.0, 0x7000] and drv.launches[0].stream == 0


GOOD_CAI = {"shape": (4, 256), "typestr": "<f4", "data": (0x8000, False), "version": 3}


@pytest.mark.parametrize(("change", "message"), [
    ({"shape": None}, "whose shape None is not a tuple of sizes"),
    ({"shape": (4, -256)}, r"whose shape \(4, -256\) is not a tuple of sizes"),
    ({"typestr": "<x7"}, "whose typestr '<x7' is not a type"),
    ({"typestr": ">f4"}, r"of big-endian elements \('>f4'\)"),
    ({"data": None}, r"whose data None is not \(pointer, read_only\)"),
    ({"strides": (1024,)}, r"whose strides \(1024,\) are not one byte stride per dim"),
    ({"strides": (1024, 3)}, r"whose strides \(1024, 3\) are not multiples of its 4-byte "
                             "elements"),
    ({"mask": 0x9000}, "with a mask: masked arrays are not supported"),
])
def test_a_bad_cuda_array_interface_is_named(fake: tuple[FakeDriver, Any],
                                             monkeypatch: pytest.MonkeyPatch,
                                             change: dict[str, Any], message: str) -> None:
    """Each field of a `__cuda_array_interface__` is checked: a malformed one is the
    argument's ArgumentError (the library's ops: a TypeError naming it), not a KeyError
    or a wrong view (byte strides that are not whole elements)."""
    from tile_mlir import ops

    drv, _ = fake
    monkeypatch.setattr(driver, "pointer_device", lambda pointer: 0)

    class CaiArray:
        __cuda_array_interface__ = {**GOOD_CAI, **change}

    with pytest.raises(ArgumentError, match=f"argument 0 .*the array has a "
                                            f"__cuda_array_interface__ {message}"):
        Kernel(SPEC, function="f")(CaiArray(), 1.0, 0x7000)
    with pytest.raises(TypeError, match=f"argument 'input' has a __cuda_array_interface__ "
                                        f"{message}"):
        ops.exp(CaiArray())
    missing = {k: v for k, v in GOOD_CAI.items() if k != "typestr"}
    CaiArray.__cuda_array_interface__ = missing
    with pytest.raises(TypeError, match="__cuda_array_interface__ without 'typestr'"):
        ops.exp(CaiArray())
    assert not drv.launches


def test_context_error_is_retried_once(fake: tuple[FakeDriver, Any],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    drv, torch = fake
    from cuda.bindings.driver import CUresult

    drv.fail_next = [CUresult.CUDA_ERROR_INVALID_CONTEXT]
    contexts: list[int] = []
    monkeypatch.setattr(driver, "context", contexts.append)
    Kernel(SPEC, function="f")(_tensor(torch, 0x1000), 1.0, _tensor(torch, 0x2000))
    assert contexts == [0] and len(drv.launches) == 1


@pytest.mark.parametrize(("change", "message"), [
    ({"contiguous": False}, r"argument 0 \(x\): the kernel needs a contiguous"),
    ({"pointer": 0x1004}, r"argument 0 \(x\): the data pointer 0x1004 is not aligned to 16"),
    ({"device": 1}, r"argument 0 \(x\): the array is on cuda:1, the kernel is loaded on cuda:0"),
    ({"device": -1}, r"argument 0 \(x\): the array is in host memory"),
    ({"dtype": "float16"}, r"argument 0 \(x\): expected f32 elements, got float16"),
    ({"shape": (256, 4)}, r"argument 0 \(x\): expected shape \(4, 256\), got \(256, 4\)"),
])
def test_bad_torch_tensors_are_refused_by_name(fake: tuple[FakeDriver, Any],
                                               change: dict[str, Any], message: str) -> None:
    drv, torch = fake
    kernel = Kernel(SPEC, function="f")
    good = _tensor(torch, 0x2000)
    kernel(_tensor(torch, 0x1000), 1.0, good)  # the plan exists: the hot path checks too
    if "dtype" in change:
        change["dtype"] = getattr(torch, change["dtype"])
    bad = _tensor(torch, change.pop("pointer", 0x1000), **change)
    with pytest.raises(ArgumentError, match=message):
        kernel(bad, 1.0, good)
    assert len(drv.launches) == 1


def test_outputs_follow_the_input_kind(fake: tuple[FakeDriver, Any]) -> None:
    _, torch = fake
    kernel = Kernel(SPEC, function="f")
    [out] = kernel.new_outputs(like=_tensor(torch, 0x1000, device=0))
    assert isinstance(out, FakeTensor) and out.shape == (4, 256) and out.dtype is torch.float32
    [host] = kernel.new_outputs(like=np.zeros(1))
    assert isinstance(host, np.ndarray) and host.dtype == np.float32 and host.shape == (4, 256)
    bf16 = arrays.empty((3,), "bf16")
    assert bf16.dtype.name == "bfloat16"


class _DLPackOnly:
    """Only the DLPack protocol of a NumPy array (host memory: device type 1)."""

    def __init__(self, array: np.ndarray):
        self.array = array

    def __dlpack__(self, stream: Any = None) -> Any:
        return self.array.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.array.__dlpack_device__()


def test_dlpack_is_read_without_copying() -> None:
    base = np.zeros((8, 256), np.float32)
    info = arrays.dlpack_info(_DLPackOnly(base[2:6]))
    assert info == arrays.ArrayInfo("float32", (4, 256), True, None, base.ctypes.data + 2048)
    strided = arrays.dlpack_info(_DLPackOnly(base[:, ::2]))
    assert not strided.contiguous and strided.shape == (8, 128)
    assert arrays.kind_of(_DLPackOnly(base)) == "dlpack"
    with pytest.raises(ArgumentError, match=r"argument 0 \(x\): the array is in host memory"):
        arrays.check(SPEC.params[0], info, "argument 0 (x)", 0)


def test_binary_choice() -> None:
    assert binary.cubin_runs_on("sm_80", "sm_86") and not binary.cubin_runs_on("sm_86", "sm_80")
    assert not binary.cubin_runs_on("sm_80", "sm_90")
    assert binary.cubin_runs_on("sm_90a", "sm_90") and not binary.cubin_runs_on("sm_90a", "sm_100")
    assert binary.ptx_runs_on("sm_80", "sm_90") and not binary.ptx_runs_on("sm_90", "sm_80")
    assert not binary.ptx_runs_on("sm_90a", "sm_100")
    wgmma = "wgmma.fence.sync.aligned;\nwgmma.mma_async.sync.aligned.m64n64k16"
    assert binary.specific_chip("sm_90", wgmma) == "sm_90a"
    assert binary.specific_chip("sm_90", "nvvm.setmaxregister increase 240") == "sm_90a"
    assert binary.specific_chip("sm_90", "ld.global.nc.v4.f32") == "sm_90"
    ptx = "//\n.version 8.0\n.target sm_90\n.address_size 64\n"
    assert binary.ptx_target(ptx) == "sm_90"


def test_program_picks_cubin_or_ptx() -> None:
    program = tile_mlir.compile(Case("add", (256,), block=128).mlir(), chip="sm_80")
    assert program.image("kernels", "sm_86")[1] == "cubin"
    assert program.image("kernels", "sm_90") == (program.ptx["kernels"].encode(), "ptx")
    with pytest.raises(IncompatibleBinaryError, match="neither runs on this sm_75 GPU"):
        program.image("kernels", "sm_75")


NO_MLIR = textwrap.dedent("""
    import sys
    sys.modules["mlir"] = None  # any import of MLIR now fails
    sys.path.insert(0, {tests!r})
    import numpy as np
    import tile_mlir
    from tile_mlir.runtime import ArgumentError, driver, load_bundle
    from tile_mlir.runtime.cache import CompilerUnavailableError
    from fakes import FakeDriver

    program = tile_mlir.compile({source!r})  # from the warm cache
    bundled = load_bundle({bundle!r})
    assert bundled.ptx == program.ptx and bundled.cubin == program.cubin
    assert program.image("kernels", "sm_90")[1] == "cubin"
    spec = program.kernels["kernel"]
    fake = FakeDriver(spec)
    driver.cuda = lambda: fake
    driver.context = lambda device=0: None
    kernel = tile_mlir.runtime.Kernel(spec, function="f")
    kernel(0x1000, 0x2000, 0x3000)
    assert fake.launches[0].values == [0x1000, 0x2000, 0x3000], fake.launches
    try:
        kernel(np.zeros(4, np.float64), 0x2000, 0x3000)
    except ArgumentError as e:
        print("refused:", e)
    try:
        tile_mlir.compile({source!r} + " ")
    except CompilerUnavailableError as e:
        print("compile:", e)
    assert not [m for m in sys.modules if m.startswith("mlir") and sys.modules[m]], "mlir"
    print("ok")
""")


def test_runtime_runs_without_mlir(tmp_path: Path) -> None:
    source = Case("add", (4, 256), block=128).mlir()
    program = tile_mlir.compile(source, chip="sm_90")  # warms the test session's cache
    path = program.save(tmp_path / "k.bundle")
    code = NO_MLIR.format(tests=str(Path(__file__).parents[1] / "support"), source=source, bundle=str(path))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "refused: argument 0 (arg0): expected f32 elements, got float64" in out
    assert "compile: compiling needs the MLIR bindings" in out
    assert "pip install xtc-mlir-python-bindings==22.1.8.4" in out
    assert "Program.save(path)" in out and out.endswith("ok\n")


class _ClusterDriver:
    """cuFuncGetAttribute / cuFuncSetAttribute of functions compiled for clusters."""

    CUresult = types.SimpleNamespace(CUDA_SUCCESS=0)
    CUfunction_attribute = types.SimpleNamespace(
        CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH="width",
        CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT="height",
        CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH="depth",
        CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED="non-portable")

    def __init__(self) -> None:
        self.clusters = {"plain": (0, 0, 0), "eight": (8, 1, 1), "sixteen": (16, 1, 1),
                         "four_by_four": (4, 4, 1)}
        self.allowed: list[tuple[str, str, int]] = []

    def cuFuncGetAttribute(self, attribute: str, function: str) -> tuple[int, int]:
        axis = ("width", "height", "depth").index(attribute)
        return 0, self.clusters[function][axis]

    def cuFuncSetAttribute(self, function: str, attribute: str, value: int) -> tuple[int]:
        self.allowed.append((function, attribute, value))
        return (0,)


def test_functions_for_clusters_past_the_portable_size_are_allowed_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    drv = _ClusterDriver()
    monkeypatch.setattr(driver, "cuda", lambda: drv)
    for function in drv.clusters:
        driver.allow_cluster(function)
    assert drv.allowed == [("sixteen", "non-portable", 1), ("four_by_four", "non-portable", 1)]



class _Exporter:
    """A DLPack producer that returns what it is given."""

    def __init__(self, capsule: Any, device: Any = (2, 0)):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, stream: Any = None) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> Any:
        return self.device


@pytest.mark.parametrize(("exporter", "message"), [
    (_Exporter(5), r"has a __dlpack__\(\) that returned 'int', not an unconsumed 'dltensor'"),
    (_Exporter(None), r"has a __dlpack__\(\) that returned 'NoneType', not an unconsumed"),
    (_Exporter(5, "cuda"), r"has a __dlpack_device__\(\) of 'cuda', not \(device_type, "),
])
def test_a_bad_dlpack_export_is_named(fake: tuple[FakeDriver, Any], exporter: _Exporter,
                                      message: str) -> None:
    from tile_mlir import ops

    drv, _ = fake
    with pytest.raises(ArgumentError, match=f"argument 0 .*the array {message}"):
        Kernel(SPEC, function="f")(exporter, 1.0, 0x7000)
    with pytest.raises(TypeError, match=f"argument 'input' {message}"):
        ops.exp(exporter)
    assert not drv.launches
