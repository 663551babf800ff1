"""Lethe: training-time activation memory planning.

    import lethe
    report = lethe.report("step.json")           # dict: lethe report --json
    graph = lethe.load(exported_dict, device="h100")
    graph.write_trace("step.trace.json")

`lethe.torch` exports a PyTorch training step as Lethe's graph JSON,
`lethe.jax` a JAX one as generic StableHLO, `lethe.schema` checks graph
files. `load`, `report` and `Graph` need the compiled module `lethe._lethe`
(built by CMake into build/python).
"""

import json
import os

__version__ = "0.1.0"
__all__ = ["Graph", "LetheError", "load", "report"]

try:
    from lethe import _lethe
    LetheError = _lethe.LetheError
except ImportError as _error:  # the pure-Python install
    _lethe = None
    _import_error = _error

    class LetheError(ValueError):
        """A graph Lethe could not load or analyse."""

_SUFFIXES = (".json", ".mlir")


def _native():
    if _lethe is None:
        raise ImportError(
            "lethe's compiled module is not available (build it with "
            "scripts/build.sh and use PYTHONPATH=build/python): "
            f"{_import_error}")
    return _lethe


def _check_device(device):
    if not isinstance(device, str) or not device:
        raise TypeError(f"device must be a profile name or a profile file "
                        f"path, got {device!r}")


class Graph:
    """A training step loaded into Lethe's canonical form."""

    def __init__(self, native, device, source):
        self._native = native
        self.device = device
        self.source = source

    def __repr__(self):
        return f"<lethe.Graph {self.source} on {self.device}>"

    @property
    def mlir(self):
        """The step in Lethe's canonical MLIR form (text)."""
        return self._native.mlir()

    def report(self, top=10):
        """The unplanned step's memory profile and predicted time, as the
        dict `lethe report --json` writes."""
        if not isinstance(top, int) or isinstance(top, bool) or top < 0:
            raise ValueError(f"top must be an integer >= 0, got {top!r}")
        return json.loads(self._native.report(top))

    def write_trace(self, path):
        """Writes the unplanned step's Chrome-trace / Perfetto timeline."""
        self._native.write_trace(os.fspath(path))


def load(graph, device="h200"):
    """Loads a training step: a `.json` / `.mlir` file path, an exported
    graph dict (as `lethe.torch.export_training_step` returns), or a Graph
    (returned as it is). `device` costs the ops that carry no time."""
    if isinstance(graph, Graph):
        return graph
    _check_device(device)
    native = _native()
    if isinstance(graph, dict):
        text = json.dumps(graph, allow_nan=False)
        return Graph(native.Graph.loads(text, "json", "<dict>", device),
                     device, "<dict>")
    if isinstance(graph, (str, os.PathLike)):
        path = os.fspath(graph)
        if not path.endswith(_SUFFIXES):
            raise ValueError(f"'{path}': expected a .json or .mlir graph file")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no graph file '{path}'")
        return Graph(native.Graph.load(path, device), device, path)
    raise TypeError("graph must be a path (.json/.mlir), an exported graph "
                    f"dict or a lethe.Graph, got {type(graph).__name__}")


def report(graph, device="h200", top=10):
    """`lethe report --json` of `graph` (anything `load` takes), as a dict."""
    return load(graph, device).report(top)
