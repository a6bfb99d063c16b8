"""The wheel also carries miles_otel.pth at its root: at interpreter start it runs
``miles_otel.instrumentation.autoinstrument()`` when ``MILES_OTEL`` is on (docs/python.md "One switch"), and costs
one environment lookup when it is off. Everything else is in pyproject.toml."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithPth(build_py):
    def run(self):
        super().run()
        self.copy_file(os.path.join(HERE, "miles_otel.pth"), os.path.join(self.build_lib, "miles_otel.pth"))


setup(cmdclass={"build_py": BuildWithPth})
