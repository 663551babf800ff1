"""Writes the training step of a small JAX MLP (loss, gradients and an SGD
update) as generic-form StableHLO: the example input of Lethe's JAX route.

    python3 python-bindings/examples/jax_mlp_step.py OUT.mlir
"""

import os
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import lethe.jax  # noqa: E402


def init(key, sizes):
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        params.append({"w": jax.random.normal(sub, (fan_in, fan_out)) * 0.1,
                       "b": jnp.zeros((fan_out,))})
    return params


def mlp(params, x):
    for i, layer in enumerate(params):
        x = x @ layer["w"] + layer["b"]
        if i + 1 < len(params):
            x = jax.nn.gelu(x)
    return x


def loss(params, x, y):
    return jnp.mean((mlp(params, x) - y) ** 2)


def step(params, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    updated = jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
    return value, updated


def main(path):
    params = init(jax.random.PRNGKey(0), [16, 32, 4])
    x, y = jnp.ones((8, 16)), jnp.zeros((8, 4))
    lethe.jax.export_training_step(step, params, x, y, path=path)


if __name__ == "__main__":
    main(sys.argv[1])
