"""The native parts: Kineto events -> raw columns (tracekit/readers/_kineto_columns.c), and one
rank's re-timing (tracekit/analyzers/_retime_core.c).

Optional: where they cannot be compiled (no C compiler), tracekit installs without them,
decodes every chunk with msgspec (tracekit.readers.kineto_native) and re-times in Python
(tracekit.analyzers.retime), with the same results.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracekit.readers._kineto_columns",
            ["tracekit/readers/_kineto_columns.c"],
            extra_compile_args=["-O3"],
            optional=True,
        ),
        Extension(
            "tracekit.analyzers._retime_core",
            ["tracekit/analyzers/_retime_core.c"],
            # the doubles of the Python model exactly: no fused multiply-add, no reassociation
            extra_compile_args=["-O2", "-ffp-contract=off", "-fno-fast-math"],
            optional=True,
        ),
    ]
)
