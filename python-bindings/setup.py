"""Only for the wheel with the native library (scripts/build-wheel.sh puts
liblethe-c.so into lethe/ of a staged copy): the package stays pure Python,
the library is loaded with ctypes, so the wheel is tagged for any Python 3
on one platform (py3-none-<platform>; the platform comes from
$LETHE_WHEEL_PLATFORM, else the build machine's). Without the library this
is the pure-Python package (py3-none-any). Metadata: pyproject.toml."""

import os

from setuptools import Distribution, setup

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY = os.path.join(HERE, "lethe", "liblethe-c.so")


class PlatformDistribution(Distribution):
    """Platform-specific: the library lands at the wheel's root (platlib)."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    def get_tag(self):
        _, _, platform = super().get_tag()
        return ("py3", "none",
                os.environ.get("LETHE_WHEEL_PLATFORM") or platform)


if os.path.exists(LIBRARY):
    setup(distclass=PlatformDistribution,
          cmdclass={"bdist_wheel": PlatformWheel})
else:
    setup()
