"""The SIMT emulator (support/simt.py) itself: it runs barriers and shuffles as the GPU
does, and reports what the PTX ISA leaves undefined instead of computing something."""

from __future__ import annotations

import numpy as np
import pytest
from support import host, simt


def _kernel(block: int, body: str) -> str:
    return f"""gpu.module @kernels {{
  gpu.func @k(%out: memref<{block}xf32>) kernel attributes {{known_block_size = array<i32: {block}, 1, 1>}} {{
    %t = gpu.thread_id x
    %ti = arith.index_cast %t : index to i32
    %v = arith.uitofp %ti : i32 to f32
    %c1 = arith.constant 1 : i32
    %c16 = arith.constant 16 : i32
    %c31 = arith.constant 31 : i32
    %full = arith.constant -1 : i32
    %low = arith.constant 65535 : i32
{body}    gpu.return
  }}
}}
"""


def _run(block: int, body: str) -> np.ndarray:
    out = np.full(block, -1.0, np.float32)
    simt.run(_kernel(block, body), [1 << 24], [host.Buffer(out, 1 << 24)])
    return out


def test_a_butterfly_exchanges_values_between_lanes() -> None:
    out = _run(64, """\
    %s = nvvm.shfl.sync bfly %full, %v, %c1, %c31 : f32 -> f32
    memref.store %s, %out[%t] : memref<64xf32>
""")
    assert np.array_equal(out, np.arange(64) ^ 1)


def test_a_partial_warp_shuffles_among_its_lanes() -> None:
    """48 threads: the second warp's mask names its 16 lanes."""
    body = """\
    %c32 = arith.constant 32 : index
    %second = arith.cmpi uge, %t, %c32 : index
    %mask = arith.select %second, %low, %full : i32
    %s = nvvm.shfl.sync bfly %mask, %v, %c1, %c31 : f32 -> f32
    memref.store %s, %out[%t] : memref<48xf32>
"""
    assert np.array_equal(_run(48, body), np.arange(48) ^ 1)


def test_a_full_mask_in_a_partial_warp_is_an_error() -> None:
    with pytest.raises(simt.EmulationError, match="names lanes up to 31, but warp 1 has 16"):
        _run(48, """\
    %s = nvvm.shfl.sync bfly %full, %v, %c1, %c31 : f32 -> f32
    memref.store %s, %out[%t] : memref<48xf32>
""")


def test_a_lane_read_outside_the_mask_is_nan() -> None:
    """Lanes 0..15 (mask 0xffff) reading 16 apart read lanes they did not name."""
    out = _run(16, """\
    %s = nvvm.shfl.sync bfly %low, %v, %c16, %c31 : f32 -> f32
    memref.store %s, %out[%t] : memref<16xf32>
""")
    assert np.isnan(out).all()


def test_a_barrier_some_threads_skip_deadlocks() -> None:
    with pytest.raises(simt.EmulationError, match=r"deadlock: bar\.sync 0"):
        _run(40, """\
    %c8 = arith.constant 8 : index
    %few = arith.cmpi ult, %t, %c8 : index
    scf.if %few {
      gpu.barrier
    }
""")


def test_a_named_barrier_counts_whole_warps() -> None:
    with pytest.raises(simt.EmulationError, match="not whole warps"):
        _run(100, """\
    %id = arith.constant 1 : i32
    %n = arith.constant 100 : i32
    nvvm.barrier id = %id number_of_threads = %n
""")


def test_shared_memory_is_shared_and_poisoned() -> None:
    """Thread t reads what thread t ^ 1 wrote after a barrier; an element nobody wrote
    reads as NaN."""
    text = """gpu.module @kernels {
  memref.global "private" @buf : memref<8xf32, #gpu.address_space<workgroup>> = uninitialized
  gpu.func @k(%out: memref<8xf32>) kernel attributes {known_block_size = array<i32: 7, 1, 1>} {
    %t = gpu.thread_id x
    %b = memref.get_global @buf : memref<8xf32, #gpu.address_space<workgroup>>
    %ti = arith.index_cast %t : index to i32
    %v = arith.uitofp %ti : i32 to f32
    memref.store %v, %b[%t] : memref<8xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %c1 = arith.constant 1 : index
    %other = arith.xori %t, %c1 : index
    %r = memref.load %b[%other] : memref<8xf32, #gpu.address_space<workgroup>>
    memref.store %r, %out[%t] : memref<8xf32>
    gpu.return
  }
}
"""
    out = np.zeros(8, np.float32)
    simt.run(text, [1 << 24], [host.Buffer(out, 1 << 24)])
    assert np.array_equal(out[:6], np.arange(6) ^ 1) and np.isnan(out[6]) and out[7] == 0
