"""null tier: a kernel compiled once is found by another process that has no MLIR at all
(the kernel cache keys tile_mlir.lang kernels on a request computed without MLIR), which
then launches it (on a fake driver)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from support.lang import load

import tile_mlir.lang as tl

KERNEL = '''
from __future__ import annotations
from typing import Annotated
import tile_mlir.lang as tl

Vec = Annotated[tl.Tensor, "f32", ("N",)]


@tl.kernel(threads=128)
def add(a: Vec, b: Vec, c: Vec, TILE: tl.constexpr = 512):
    piece = slice(tl.block_id() * TILE, (tl.block_id() + 1) * TILE)
    tl.cta.add(c[piece], a[piece], b[piece])
'''

NO_MLIR = textwrap.dedent("""
    import ctypes, importlib.util, sys, types
    sys.modules["mlir"] = None  # any import of MLIR now fails
    from tile_mlir.runtime import driver
    from tile_mlir.runtime.arrays import SCALAR_CTYPES

    spec = importlib.util.spec_from_file_location("lang_cache_kernel", {path!r})
    module = importlib.util.module_from_spec(spec)
    sys.modules["lang_cache_kernel"] = module
    spec.loader.exec_module(module)
    import tile_mlir.lang as tl

    class Driver:
        CUresult = types.SimpleNamespace(CUDA_SUCCESS=0)
        CUfunction_attribute = types.SimpleNamespace(
            CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH=11,
            CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT=12,
            CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH=13)
        launches = []
        def cuFuncGetAttribute(self, attribute, function):
            return 0, 0  # no cluster required
        def cuModuleLoadData(self, image):
            return 0, "module"
        def cuModuleGetFunction(self, handle, name):
            return 0, name.decode()
        def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            pointers = (ctypes.c_void_p * 4).from_address(params)
            kinds = [ctypes.c_uint64, ctypes.c_int32, ctypes.c_uint64, ctypes.c_uint64]
            values = [k.from_address(pointers[i]).value for i, k in enumerate(kinds)]
            self.launches.append((f, (gx, gy, gz), stream, values))
            return (0,)

    fake = Driver()
    driver.cuda = lambda: fake
    driver.context = lambda device=0: None
    driver.gpu_available = lambda: True
    driver.device_chip = lambda device=0: "sm_90"

    class Tensor:
        def __init__(self, n, pointer):
            self.shape, self.dtype, self.pointer = (n,), "torch.float32", pointer
            self.is_cuda, self.device = True, "cuda:0"
        def stride(self): return (1,)
        def data_ptr(self): return self.pointer
        def get_device(self): return 0

    torch = types.ModuleType("torch")
    torch.Tensor = Tensor
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0x5000)
    sys.modules["torch"] = torch

    a, b, c = Tensor(1000, 0x10000), Tensor(1000, 0x20000), Tensor(1000, 0x30000)
    spec = module.add.signature(a, b, c)
    program = module.add.compile(spec)
    print("ptx", len(program.ptx["kernels"]))
    module.add[lambda d: (tl.cdiv(d["N"], 512),)](a, b, c)
    module.add[(2,)](Tensor(1000, 0x40000), b, c)
    print("launches", fake.launches)
    try:
        module.add.compile(module.add.signature(a, b, c, TILE=256))
    except Exception as e:
        print("uncached:", type(e).__name__, str(e)[:60])
    assert not [m for m in sys.modules if m.startswith("mlir") and sys.modules[m]], "mlir"
    assert "tile_mlir.lang.builder" not in sys.modules
    print("ok")
""")


def test_a_warm_cache_serves_a_process_without_mlir(tmp_path: Path) -> None:
    path = tmp_path / "lang_cache_kernel.py"
    path.write_text(KERNEL)
    module = load(path, "lang_cache_kernel")
    descs = [tl.ArrayDesc("f32", (1000,))] * 3
    program = module.add.compile(module.add.signature(*descs), chip="sm_90")
    result = subprocess.run([sys.executable, "-c", NO_MLIR.format(path=str(path))],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"ptx {len(program.ptx['kernels'])}"
    assert lines[1] == ("launches [('add', (2, 1, 1), 20480, [65536, 1000, 131072, 196608]), "
                        "('add', (2, 1, 1), 20480, [262144, 1000, 131072, 196608])]")
    assert lines[2].startswith("uncached: CompilerUnavailableError compiling needs the MLIR")
    assert lines[3] == "ok"


def test_the_request_follows_the_source_file(tmp_path: Path) -> None:
    path = tmp_path / "lang_cache_edit.py"
    path.write_text(KERNEL)
    first = load(path, "lang_cache_edit").add
    spec = first.signature(*[tl.ArrayDesc("f32", (1000,))] * 3)
    path.write_text(KERNEL + "\n# an edit\n")
    second = load(path, "lang_cache_edit").add
    assert first.request(spec) != second.request(spec)
    assert first.request(spec).splitlines()[0] == second.request(spec).splitlines()[0]
