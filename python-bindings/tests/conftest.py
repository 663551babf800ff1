import importlib.util
import os
import sys

# Tests run against the `lethe` on PYTHONPATH (scripts/test.sh points it at
# build/python, which has the compiled module), else against the sources.
if importlib.util.find_spec("lethe") is None:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
