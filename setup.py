"""The one compiled piece of kafkad: the produce path's record scanner (wire/_record_kernel.c).

Optional: where no C compiler is found the install goes on and wire/record_kernel.py's Python
scanner is used (correct, ~50x slower per record). Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "wire._record_kernel",
            ["wire/_record_kernel.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
