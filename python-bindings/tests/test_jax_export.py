"""JAX route: generic StableHLO of a training step (runs where JAX is
installed; CI has none)."""

import os
import subprocess
import sys

import pytest

jax = pytest.importorskip("jax")

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "jax_mlp_step.py")


def test_generic_stablehlo(tmp_path):
    path = tmp_path / "step.mlir"
    subprocess.run([sys.executable, EXAMPLE, str(path)], check=True,
                   env=dict(os.environ, JAX_PLATFORMS="cpu"))
    text = path.read_text()
    assert text.startswith("#loc") or text.startswith('"builtin.module"')
    assert '"func.func"' in text and '"stablehlo.dot_general"' in text
    # Forward, backward and optimizer ops are told apart by name stacks.
    assert "/jvp(" in text and "/transpose(jvp(" in text


def test_rejects_non_callable():
    import lethe.jax
    with pytest.raises(TypeError):
        lethe.jax.export_training_step(42)
