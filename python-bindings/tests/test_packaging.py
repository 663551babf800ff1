"""The package is importable from the build tree, installs with pip, and
the wheel with the native library (scripts/build-wheel.sh) plans in a fresh
virtual environment with no build tree."""

import filecmp
import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
REPO = os.path.dirname(SOURCE)
BUILD = os.path.join(REPO, os.environ.get("LETHE_BUILD_DIR", "build"))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else sys.executable
IMPORT = "import lethe, lethe.schema; print(lethe.__file__)"


def _clean_env(**extra):
    """The environment without anything that points into this checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "LETHE_LIBRARY")}
    return dict(env, **extra)


def _import_from(path, cwd):
    env = _clean_env(PYTHONPATH=path)
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
    if os.path.exists(os.path.join(BUILD, "bin", "lethe")):
        assert os.path.exists(os.path.join(package, "liblethe-c.so")), \
            "the compiler is built but not the native library"


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
    # Pure Python: the planner says what is missing.
    result = subprocess.run(
        [PYTHON, "-c", "import lethe; lethe.report('step.json')"],
        capture_output=True, text=True, cwd=tmp_path,
        env=_clean_env(PYTHONPATH=str(site)))
    assert "ImportError: lethe's native library is not available" in \
        result.stderr, result.stderr


# glibc's libraries: all the native library may need.
GLIBC = ("libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1",
         "libpthread.so.0", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1")


def _check_library(path):
    """Needs only glibc; exports only the C API."""
    dynamic = subprocess.run(["readelf", "-d", path], capture_output=True,
                             text=True, check=True).stdout
    needed = [line.split("[")[1].rstrip("]") for line in
              dynamic.splitlines() if "(NEEDED)" in line]
    assert needed and set(needed) <= set(GLIBC), needed
    symbols = subprocess.run(["nm", "-D", "--defined-only", path],
                             capture_output=True, text=True,
                             check=True).stdout.split("\n")
    names = [line.split()[-1] for line in symbols if line.strip()]
    assert "letheGraphPlan" in names
    assert [n for n in names if not n.startswith("lethe")] == []


# Runs in the virtual environment: plans GPT-2 at half its unplanned peak.
PLAN_GPT2 = """
import json, sys
import lethe
plan = lethe.plan(sys.argv[1], budget="50%", allow_infeasible=True)
print(json.dumps({"file": lethe.__file__, "doc": json.loads(plan.to_json())}))
"""


def test_wheel_plans_without_build_tree(tmp_path):
    """scripts/build-wheel.sh's wheel, installed into a fresh venv from
    outside the repository with nothing on PYTHONPATH, plans GPT-2 as the
    driver does."""
    graph = os.path.join(REPO, "graphs", "graph_gpt2.json")
    driver = os.path.join(BUILD, "bin", "lethe")
    if not os.path.exists(driver) or not os.path.exists(graph):
        pytest.skip("no compiler build or no shared graphs")
    result = subprocess.run(
        [os.path.join(REPO, "scripts", "build-wheel.sh"),
         str(tmp_path / "wheels")], capture_output=True, text=True,
        env=dict(os.environ, LETHE_BUILD_DIR=BUILD))
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = (tmp_path / "wheels").iterdir()
    name, version, python, abi, platform = wheel.stem.split("-")
    assert (name, python, abi) == ("lethe", "py3", "none")
    assert platform.startswith("manylinux_2_"), platform
    assert wheel.stat().st_size < 30 << 20
    with zipfile.ZipFile(wheel) as archive:
        files = archive.namelist()
        assert "lethe/py.typed" in files and "lethe/_native.py" in files
        assert not [f for f in files if f.endswith(".so")
                    and f != "lethe/liblethe-c.so"]
        archive.extract("lethe/liblethe-c.so", tmp_path / "unpacked")
    _check_library(str(tmp_path / "unpacked" / "lethe" / "liblethe-c.so"))

    venv = tmp_path / "venv"
    home = tmp_path / "elsewhere"
    home.mkdir()
    made = subprocess.run([PYTHON, "-m", "venv", str(venv)], cwd=home,
                          capture_output=True, text=True, env=_clean_env())
    if "ensurepip" in made.stdout + made.stderr:
        pytest.skip("python3-venv is not installed (scripts/setup.sh)")
    assert made.returncode == 0, made.stderr
    python = str(venv / "bin" / "python")
    installed = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
         str(wheel)], cwd=home, capture_output=True, text=True,
        env=_clean_env())
    assert installed.returncode == 0, installed.stderr
    run = subprocess.run([python, "-c", PLAN_GPT2, graph], cwd=home,
                         capture_output=True, text=True, env=_clean_env())
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["file"].startswith(str(venv))
    doc = result["doc"]
    assert doc["budget_bytes"] == doc["baseline_peak_bytes"] // 2
    assert doc["values"] and doc["least_feasible_budget_bytes"]

    # The driver's plan, infeasible or not (it writes the document and
    # exits 1 when infeasible).
    out = tmp_path / "plan.json"
    subprocess.run([driver, "plan", graph, "--budget", "50%", "--json",
                    str(out)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    expected = json.loads(out.read_text())
    doc.pop("solve_ms"), expected.pop("solve_ms")
    assert doc == expected
