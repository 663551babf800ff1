# -*- Python -*-
# The GPU integration suite: a lit suite of its own, so that it runs on the
# GPU machines, which have lit (carried as a wheel) but no LLVM build:
#   scripts/gpu-tests.sh            builds the runtime and runs this suite.
# Inside the main suite (scripts/test.sh) it is found as a nested suite and
# reported unsupported where no GPU is present.

import os
import shutil
import sys

import lit.formats

config.name = "LETHE-GPU"
# lit's internal shell (execute_external=False): no bash needed.
config.test_format = lit.formats.ShTest(False)
config.suffixes = [".test"]
config.excludes = ["programs"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
src_root = os.path.dirname(os.path.dirname(config.test_source_root))
build = os.environ.get("LETHE_RUNTIME_BUILD_DIR",
                       os.environ.get("LETHE_BUILD_DIR", "build"))
if not os.path.isabs(build):
    build = os.path.join(src_root, build)
config.test_exec_root = os.path.join(build, "test-integration")
os.makedirs(config.test_exec_root, exist_ok=True)

bin_dir = os.path.join(build, "bin")
config.substitutions.append(("%lethe-run", os.path.join(bin_dir, "lethe-run")))
config.substitutions.append(("%bin", bin_dir))
config.substitutions.append(("%programs", os.path.join(build, "programs")))
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%S_src", config.test_source_root))

# Pass CUDA / NCCL settings through; keep NVLink multicast off, as the GPU
# machines require.
for name, value in os.environ.items():
    if name.startswith(("CUDA_", "NCCL_", "LETHE_", "NVSHMEM_", "TORCH_")):
        config.environment[name] = value
config.environment["NCCL_NVLS_ENABLE"] = "0"

if shutil.which("nvidia-smi") and os.system("nvidia-smi -L >/dev/null 2>&1") == 0:
    config.available_features.add("cuda")
if shutil.which("compute-sanitizer"):
    config.available_features.add("compute-sanitizer")
