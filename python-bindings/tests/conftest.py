import os
import sys

# Tests run against the source tree (no install needed).
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
