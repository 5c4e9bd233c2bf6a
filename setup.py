"""The one compiled piece: tile_mlir.runtime._launch (cuLaunchKernel with the arguments
packed in C), built by pip install against the stable ABI, so one build serves every
Python from 3.11. Optional: where no C compiler is found, pip install still succeeds and
the library launches through cuda-python (slower per call; see _launch.c)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tile_mlir.runtime._launch",
            sources=["tile_mlir/runtime/_launch.c"],
            define_macros=[("Py_LIMITED_API", "0x030B0000")],
            py_limited_api=True,
            optional=True,
            libraries=["dl"],
        )
    ],
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
