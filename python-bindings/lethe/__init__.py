"""Lethe: training-time activation memory planning.

`lethe.torch` exports a PyTorch training step as Lethe's graph JSON;
`lethe.schema` checks such a file. The compiled bindings (report, plan) are
added by the `_lethe` extension when it is built.
"""

__version__ = "0.1.0"
