"""tile-opt behaves like mlir-opt: files or stdin, -o, pipelines and pass flags,
split input, diagnostics as file:line:col with exit status 1 and no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VECTOR_ADD = ROOT / "examples" / "vector_add.mlir"
TILE_OPT = [sys.executable, "-m", "tile_mlir"]  # works with or without the console script

BAD_SCOPE = """gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "grid", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}
"""


def tile_opt(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TILE_OPT, *args], input=stdin, capture_output=True, text=True,
                          check=False, cwd=ROOT)


def test_prints_the_tile_stage() -> None:
    result = tile_opt(str(VECTOR_ADD))
    assert result.returncode == 0, result.stderr
    assert '"tile.elementwise"' in result.stdout and "gpu.func @vector_add" in result.stdout


def test_ptx_has_128_bit_accesses() -> None:
    result = tile_opt(str(VECTOR_ADD), "-p", "tile-to-ptx", "--emit=ptx")
    assert result.returncode == 0, result.stderr
    assert "ld.global.nc.v4" in result.stdout and "st.global.v4" in result.stdout


def test_stdin_and_output_file(tmp_path: Path) -> None:
    out = tmp_path / "out.mlir"
    result = tile_opt("-", "-o", str(out), "--tile-lower", stdin=VECTOR_ADD.read_text())
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and "vector.load" in out.read_text()


def test_cubin(tmp_path: Path) -> None:
    out = tmp_path / "k.cubin"
    result = tile_opt(str(VECTOR_ADD), "-p", "tile-to-ptx", "--emit=cubin", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert out.read_bytes()[:4] == b"\x7fELF"
    no_file = tile_opt(str(VECTOR_ADD), "-p", "tile-to-ptx", "--emit=cubin")
    assert no_file.returncode == 2 and "give -o FILE" in no_file.stderr


def test_chip_option() -> None:
    result = tile_opt(str(VECTOR_ADD), "-p", "tile-to-ptx", "--emit=ptx", "--chip", "sm_80")
    assert ".target sm_80" in result.stdout


def test_pass_flags_mixed_with_upstream_passes() -> None:
    result = tile_opt(str(VECTOR_ADD), "--tile-lower", "--canonicalize",
                      "--convert-scf-to-cf", "--cse")
    assert result.returncode == 0, result.stderr
    assert "cf.br" in result.stdout and "scf.for" not in result.stdout


def test_pipeline_with_upstream_options_and_module_anchor() -> None:
    result = tile_opt(str(VECTOR_ADD), "-p",
                      "builtin.module(tile-to-gpu,gpu-to-nvvm{chip=sm_80})")
    assert result.returncode == 0, result.stderr
    assert "llvm.func @vector_add" in result.stdout and 'chip = "sm_80"' in result.stdout


def test_error_is_located_with_exit_1_and_no_traceback() -> None:
    result = tile_opt("-", "--tile-verify", stdin=BAD_SCOPE)
    assert result.returncode == 1
    assert result.stderr.startswith("<stdin>:3:5: error: 'tile.elementwise' op has scope 'grid'")
    assert "^" in result.stderr and "Traceback" not in result.stderr


def test_syntax_error() -> None:
    result = tile_opt("-", stdin="gpu.module @m {\n  %x = arith.bogus\n}\n")
    assert result.returncode == 1
    assert result.stderr.startswith("<stdin>:2:") and "Traceback" not in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["-p", "tile-frobnicate"], "unknown pass or pipeline 'tile-frobnicate'"),
    (["-p", "tile-dispatch{verbose=1}"], "tile-dispatch has no option 'verbose'"),
    (["-p", "tile-to-ptx{cheap=1}"], "pipeline tile-to-ptx has no parameter cheap"),
    (["-p", "gpu.module(tile-lower)"], "put it at the top level"),
    (["-p", "tile-lower", "--cse"], "either with -p/--pass-pipeline or as flags"),
    (["no-such-file.mlir"], "cannot read no-such-file.mlir"),
    (["-o", "/no-such-dir/out.mlir"], "cannot write /no-such-dir/out.mlir"),
])
def test_usage_errors(args: list[str], message: str) -> None:
    result = tile_opt(*(args if args[0].endswith(".mlir") else [str(VECTOR_ADD), *args]))
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_split_input_file_keeps_line_numbers() -> None:
    text = VECTOR_ADD.read_text() + "// -----\n" + BAD_SCOPE
    result = tile_opt("-", "--split-input-file", "--tile-verify", stdin=text)
    first_line_of_second_chunk = VECTOR_ADD.read_text().count("\n") + 2
    assert result.returncode == 1
    assert f"<stdin>:{first_line_of_second_chunk + 2}:5: error" in result.stderr
    assert "gpu.func @vector_add" in result.stdout  # the good chunk is still printed


def test_print_ir_after_all() -> None:
    result = tile_opt(str(VECTOR_ADD), "--mlir-print-ir-after-all", "-p", "tile-to-gpu")
    assert result.returncode == 0, result.stderr
    for name in ("tile-verify", "tile-dispatch", "tile-lower", "canonicalize"):
        assert "IR Dump After" in result.stderr and f"({name})" in result.stderr


def test_explain_and_list_passes() -> None:
    result = tile_opt(str(VECTOR_ADD), "--tile-dispatch", "--tile-explain")
    assert "remark: tile.elementwise add at scope cta: variant gmem" in result.stderr
    listing = tile_opt("--list-passes").stdout
    assert "tile-verify" in listing and "tile-to-ptx" in listing
    assert "tile.reduce       columns" in listing


def test_verify_diagnostics_checks_both_ways() -> None:
    expected = BAD_SCOPE.replace(
        '    "tile.elementwise"',
        "    // expected-error@+1 {{has scope 'grid'}}\n    \"tile.elementwise\"")
    assert tile_opt("-", "--tile-verify", "--verify-diagnostics", stdin=expected).returncode == 0
    missing = tile_opt("-", "--tile-verify", "--verify-diagnostics", stdin=BAD_SCOPE)
    assert missing.returncode == 1 and "unexpected error" in missing.stderr
    wrong = expected.replace("has scope 'grid'", "something else")
    result = tile_opt("-", "--tile-verify", "--verify-diagnostics", stdin=wrong)
    assert result.returncode == 1 and "was not produced" in result.stderr
