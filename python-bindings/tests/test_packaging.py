"""The package is importable from the build tree and installs with pip."""

import filecmp
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
REPO = os.path.dirname(SOURCE)
BUILD = os.path.join(REPO, os.environ.get("LETHE_BUILD_DIR", "build"))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else sys.executable
IMPORT = "import lethe, lethe.schema; print(lethe.__file__)"


def _import_from(path, cwd):
    env = dict(os.environ, PYTHONPATH=path)
    result = subprocess.run([PYTHON, "-c", IMPORT], capture_output=True,
                            text=True, env=env, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_build_tree_package(tmp_path):
    package = os.path.join(BUILD, "python", "lethe")
    if not os.path.isdir(package):
        pytest.skip("no build/python (run the CMake build first)")
    sources = [f for f in os.listdir(os.path.join(SOURCE, "lethe"))
               if f.endswith(".py")]
    for name in sources:
        assert filecmp.cmp(os.path.join(SOURCE, "lethe", name),
                           os.path.join(package, name), shallow=False), \
            f"build/python/lethe/{name} is stale"
    where = _import_from(os.path.join(BUILD, "python"), cwd=tmp_path)
    assert where == os.path.join(package, "__init__.py")


def test_pip_install(tmp_path):
    try:
        import setuptools  # noqa: F401
        import wheel  # noqa: F401
    except ImportError:
        pytest.skip("setuptools and wheel are needed to build the package")
    source = tmp_path / "src"
    shutil.copytree(SOURCE, source,
                    ignore=shutil.ignore_patterns("tests", "build",
                                                  "__pycache__", "*.egg-info"))
    site = tmp_path / "site"
    result = subprocess.run(
        [PYTHON, "-m", "pip", "install", "-q", "--no-build-isolation",
         "--no-deps", "--no-index", "--target", str(site), str(source)],
        capture_output=True, text=True)
    if "No module named pip" in result.stderr:
        pytest.skip("pip is not installed")
    assert result.returncode == 0, result.stderr
    where = _import_from(str(site), cwd=tmp_path)
    assert where == str(site / "lethe" / "__init__.py")
