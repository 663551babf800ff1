"""Export a JAX training step as generic-form StableHLO for Lethe.

    import lethe.jax
    def step(params, x, y):
        return jax.value_and_grad(loss)(params, x, y)
    lethe.jax.export_training_step(step, params, x, y, path="step.mlir")

`jax.jit(step).lower(...)` gives the step as one StableHLO function (forward
and backward together; backward ops carry `transpose(jvp(...))` in their
name-stack locations). Lethe is built on upstream MLIR, which has no
StableHLO dialect, so the module is printed in the generic op form with
debug locations: upstream MLIR parses that with unregistered dialects
allowed, and `lethe-opt --allow-unregistered-dialect --lethe-import-ops`
turns it into Lethe's canonical graph (docs/Python.md).
"""

import os
import tempfile

__all__ = ["export_training_step", "stablehlo_text"]


def stablehlo_text(lowered):
    """Generic-form StableHLO text (with locations) of a `jax.stages.Lowered`."""
    module = lowered.compiler_ir(dialect="stablehlo")
    return module.operation.get_asm(print_generic_op_form=True,
                                    enable_debug_info=True)


def export_training_step(step, *example_args, path=None, **jit_kwargs):
    """Lowers `jax.jit(step, **jit_kwargs)` at `example_args` and returns the
    generic StableHLO text; also writes it to `path` (atomically) if given.

    `step` is the whole training step: typically
    `jax.value_and_grad(loss_fn)(params, batch)`, optionally followed by the
    optimizer update. Arguments may be arrays or `jax.ShapeDtypeStruct`s.
    """
    import jax

    if not callable(step):
        raise TypeError("step must be a callable training step")
    lowered = jax.jit(step, **jit_kwargs).lower(*example_args)
    text = stablehlo_text(lowered)
    if path is not None:
        path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".lethe-", suffix=".mlir",
                                   dir=directory)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    return text
