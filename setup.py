"""The one thing pyproject.toml does not declare: the worker's update kernel in C (a3c/learn/update/_update_kernel.c,
used
through a3c.learn.update.kernel). Optional: where no C compiler (or no Python headers) is found, the build skips it and
the package installs and runs the same update in numpy. (setuptools' ext-modules table in pyproject.toml would do
the same, but is still marked experimental; this is the stable form.)"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "a3c.learn.update._update_kernel",
            sources=["a3c/learn/update/_update_kernel.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
