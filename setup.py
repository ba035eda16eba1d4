"""The one native part: Kineto events -> raw columns (tracekit/readers/_kineto_columns.c).

Optional: where it cannot be compiled (no C compiler), tracekit installs without it and
decodes every chunk with msgspec (tracekit.readers.kineto_native).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracekit.readers._kineto_columns",
            ["tracekit/readers/_kineto_columns.c"],
            extra_compile_args=["-O3"],
            optional=True,
        )
    ]
)
