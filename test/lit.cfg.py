# -*- Python -*-
# lit configuration for Lethe's test suite.

import os
import shutil

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "LETHE"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".json", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.lethe_obj_root, "test")
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%lethe_src", config.lethe_src_root))
config.substitutions.append(("%lethe_obj", config.lethe_obj_root))
config.substitutions.append(
    ("%graphs", os.path.join(config.lethe_src_root, "graphs")))
# The C++ compiler of the build, for tests that compile generated programs.
config.substitutions.append(("%host_cxx", config.host_cxx))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

tool_dirs = [config.lethe_tools_dir, config.llvm_tools_dir]
tools = ["lethe-opt", "lethe-translate", "lethe-capi-test",
         ToolSubst("lethe", unresolved="ignore")]

# The CUDA runtime's CPU-side tests (dry runs of compiled programs).
if config.lethe_build_runtime in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("lethe-runtime")
    config.substitutions.append(
        ("%programs", os.path.join(config.lethe_obj_root, "programs")))
    tools.append("lethe-run")
    tools.append("lethe-rt-bench")
    tools.append("lethe-calibrate")

# GPU tests (test/integration, a lit suite of its own) run only where a CUDA
# device is present.
if shutil.which("nvidia-smi") and os.system("nvidia-smi -L >/dev/null 2>&1") == 0:
    config.available_features.add("cuda")
# Upstream mlir-opt (Debian's, linked against libMLIR.so) for the plugin test.
for mlir_opt in [os.path.join(config.llvm_tools_dir, "mlir-opt"), "/usr/bin/mlir-opt-22"]:
    if os.path.exists(mlir_opt):
        config.available_features.add("mlir-opt-22")
        config.substitutions.append(("mlir-opt-22", mlir_opt))
        break
config.substitutions.append(
    ("%lethe_plugin", os.path.join(config.lethe_obj_root, "lib", "LethePlugin.so")))

if shutil.which("python3"):
    config.available_features.add("python3")

llvm_config.add_tool_substitutions(tools, tool_dirs)
