#!/usr/bin/env python3
"""Exports the real-graph corpus (graphs/graph_*.json): one training step of
each model, random weights, bf16, captured by Lethe's own exporter
(lethe.torch.export_training_step) with every op timed alone on the GPU.

    python3 bench/export_corpus.py --out DIR [--models a,b] [--tiny]
        [--deadline S]

Models come from torchvision and transformers (random weights, no
downloads) and from small definitions here (U-Net, DiT); each is wrapped so
that the module returns the scalar loss. A model that fails to export is
reported and skipped (the table says why); `--deadline` skips models not
started before it. `--tiny` exports toy sizes on CPU (no op times) to check
that every model captures. On the GPU machine: bench/gpu_corpus.sh.
"""

import argparse
import json
import os
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python-bindings"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import lethe.torch as lt  # noqa: E402


class LossOf(nn.Module):
    """Wraps a model so that forward(x, y) returns the scalar loss (the
    exporter's loss_fn is then the identity)."""

    def __init__(self, model, loss):
        super().__init__()
        self.m = model
        self.loss = loss

    def forward(self, x, y):
        return self.loss(self.m, x, y)


def _ce(model, x, y):
    return F.cross_entropy(model(x).float(), y)


# The loss is computed here, not by transformers' loss functions (which log
# warnings that dynamo cannot trace); no KV cache in training.
def _hf_lm(model, ids, labels):
    logits = model(input_ids=ids, use_cache=False).logits
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())


def _hf_mlm(model, ids, labels):
    logits = model(input_ids=ids).logits
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())


def _hf_seq2seq(model, ids, labels):
    # The decoder reads a quarter of the encoder's length (the labels
    # shifted by one): an encoder-decoder step as in summarisation.
    logits = model(input_ids=ids, decoder_input_ids=labels,
                   use_cache=False).logits
    return F.cross_entropy(logits.flatten(0, 1).float(),
                           labels.roll(-1, 1).flatten())


# --- small model definitions (no torchvision/transformers equivalent) -----

class ConvBlock(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1),
                         nn.GroupNorm(8, cout), nn.SiLU(),
                         nn.Conv2d(cout, cout, 3, padding=1),
                         nn.GroupNorm(8, cout), nn.SiLU())


class UNet(nn.Module):
    """A 4-level U-Net (segmentation), skip connections concatenated."""

    def __init__(self, base, classes=4):
        super().__init__()
        widths = [base, 2 * base, 4 * base, 8 * base]
        self.down = nn.ModuleList()
        cin = 3
        for w in widths:
            self.down.append(ConvBlock(cin, w))
            cin = w
        self.mid = ConvBlock(widths[-1], 2 * widths[-1])
        self.up = nn.ModuleList()
        self.upconv = nn.ModuleList()
        cin = 2 * widths[-1]
        for w in reversed(widths):
            self.upconv.append(nn.ConvTranspose2d(cin, w, 2, stride=2))
            self.up.append(ConvBlock(2 * w, w))
            cin = w
        self.head = nn.Conv2d(base, classes, 1)

    def forward(self, x):
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.mid(x)
        for upconv, block in zip(self.upconv, self.up):
            x = block(torch.cat([upconv(x), skips.pop()], 1))
        return self.head(x)


class DiTBlock(nn.Module):
    """DiT block with adaLN-Zero conditioning (Peebles & Xie)."""

    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.ada = nn.Linear(dim, 6 * dim)
        self.heads = heads

    def forward(self, x, c):
        b, t, d = x.shape
        s1, g1, a1, s2, g2, a2 = self.ada(F.silu(c)).unsqueeze(1).chunk(6, -1)
        h = self.norm1(x) * (1 + g1) + s1
        q, k, v = self.qkv(h).view(b, t, 3, self.heads,
                                   d // self.heads).permute(2, 0, 3, 1, 4)
        h = F.scaled_dot_product_attention(q, k, v)
        x = x + a1 * self.proj(h.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x) * (1 + g2) + s2
        return x + a2 * self.fc2(F.gelu(self.fc1(h), approximate="tanh"))


class DiT(nn.Module):
    """DiT-B/2 on 32x32x4 latents: noise prediction, class conditioning."""

    def __init__(self, dim, layers, heads, latent=32, patch=2, classes=1000):
        super().__init__()
        self.patch = nn.Conv2d(4, dim, patch, patch)
        self.pos = nn.Parameter(torch.zeros(1, (latent // patch) ** 2, dim))
        self.t_embed = nn.Sequential(nn.Linear(256, dim), nn.SiLU(),
                                     nn.Linear(dim, dim))
        self.y_embed = nn.Embedding(classes, dim)
        self.blocks = nn.ModuleList(DiTBlock(dim, heads)
                                    for _ in range(layers))
        self.norm = nn.LayerNorm(dim, elementwise_affine=False)
        self.out = nn.Linear(dim, patch * patch * 4)
        self.latent, self.p = latent, patch

    def forward(self, x, t, y):
        half = 128
        freqs = torch.exp(-torch.arange(half, device=x.device) *
                          (9.21 / half))
        temb = t[:, None].float() * freqs[None]
        temb = torch.cat([temb.cos(), temb.sin()], -1).to(x.dtype)
        c = self.t_embed(temb) + self.y_embed(y)
        h = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        for block in self.blocks:
            h = block(h, c)
        return self.out(self.norm(h))


def _dit_loss(model, x, y):
    noise = x * 0.5  # stands in for the sampled noise: deterministic step
    t = torch.full((x.shape[0],), 500, device=x.device)
    pred = model(x + noise, t, y)
    b = x.shape[0]
    target = noise.reshape(b, 4, 16, 2, 16, 2).permute(0, 2, 4, 3, 5, 1)
    return F.mse_loss(pred.float(), target.reshape(b, 256, 16).float())


# --- the corpus ------------------------------------------------------------
# name: (family, builder(tiny) -> (module, (x, y), meta)). Sizes are chosen
# for 1-20 GB of activations in bf16 at the batch given.

def _images(batch, size, classes):
    x = torch.randn(batch, 3, size, size)
    return x, torch.randint(0, classes, (batch,))


def _tv(name, batch, size=224):
    def build(tiny):
        import torchvision.models as tvm
        kw = {"image_size": 32} if (tiny and name == "vit_b_16") else {}
        model = getattr(tvm, name)(weights=None, **kw)
        b, s = (2, 32 if name != "swin_t" else 64) if tiny else (batch, size)
        x, y = _images(b, s, 1000)
        return LossOf(model, _ce), (x, y), {"batch": b, "image": s}
    return build


def _hf(cls_name, cfg_name, cfg, tiny_cfg, batch, seq, loss=_hf_lm,
        attn="sdpa", experts=None):
    def build(tiny):
        import transformers
        c = dict(tiny_cfg if tiny else cfg)
        config = getattr(transformers, cfg_name)(**c)
        try:
            config._attn_implementation = attn
        except Exception:
            pass
        if experts:
            # Experts as grouped matmuls over the routed tokens (CUDA), or
            # one batched matmul with per-token weights (CPU): static shapes
            # (the default loops over the tokens each expert got,
            # data-dependent sizes that dynamo cannot capture whole).
            config._experts_implementation = (
                experts if torch.cuda.is_available() and not tiny
                else "batched_mm")
        model = getattr(transformers, cls_name)(config)
        b, s = (2, 32) if tiny else (batch, seq)
        vocab = config.vocab_size
        ids = torch.randint(0, vocab, (b, s))
        labels = torch.randint(0, vocab, (b, s // 4 if loss is _hf_seq2seq
                                          else s))
        meta = {"batch": b, "seq": s, "config": c}
        return LossOf(model, loss), (ids, labels), meta
    return build


def _unet(tiny):
    base, b, s = (8, 2, 32) if tiny else (64, 16, 256)
    x = torch.randn(b, 3, s, s)
    y = torch.randint(0, 4, (b, s, s))
    return LossOf(UNet(base), _ce), (x, y), {"batch": b, "image": s,
                                             "base": base}


def _dit(tiny):
    dim, layers, heads, b = (64, 2, 4, 2) if tiny else (768, 12, 12, 64)
    x = torch.randn(b, 4, 32, 32)
    y = torch.randint(0, 1000, (b,))
    return (LossOf(DiT(dim, layers, heads), _dit_loss), (x, y),
            {"batch": b, "latent": 32, "dim": dim, "layers": layers})


def _llama8l(tiny):
    import torch_budget_bench as tb
    model, tokens, targets = tb.make_model("llama-8l", tiny, "cpu",
                                           torch.float32)
    c = (tb.TINY if tiny else tb.CONFIGS)["llama-8l"]
    # The bench's model returns the loss itself; LossOf keeps one shape.
    return (LossOf(model, lambda m, x, y: m(x, y)), (tokens, targets),
            {"batch": c["batch"], "seq": c["seq"], "config": c})


TINY_LM = dict(vocab_size=256, hidden_size=64, intermediate_size=128,
               num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=64)

CORPUS = {
    "vit_b16": ("vision transformer", _tv("vit_b_16", 64)),
    "swin_t": ("vision, windowed attention", _tv("swin_t", 64)),
    "convnext_t": ("vision CNN", _tv("convnext_tiny", 64)),
    "mobilenet_v3": ("vision CNN, depthwise", _tv("mobilenet_v3_large", 128)),
    "unet": ("vision, U-Net", _unet),
    "bert_base": ("encoder-only LM", _hf(
        "BertForMaskedLM", "BertConfig",
        dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
             intermediate_size=3072, vocab_size=30522),
        dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=128, vocab_size=256),
        16, 512, loss=_hf_mlm)),
    "qwen2_gqa": ("decoder LM, GQA", _hf(
        "Qwen2ForCausalLM", "Qwen2Config",
        dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=12,
             num_attention_heads=12, num_key_value_heads=2, vocab_size=32000,
             max_position_embeddings=4096),
        TINY_LM, 2, 2048)),
    "t5_base": ("encoder-decoder LM", _hf(
        "T5ForConditionalGeneration", "T5Config",
        dict(d_model=768, d_ff=3072, num_layers=6, num_decoder_layers=6,
             num_heads=12, d_kv=64, vocab_size=32128,
             decoder_start_token_id=0, pad_token_id=0),
        dict(d_model=64, d_ff=128, num_layers=2, num_decoder_layers=2,
             num_heads=4, d_kv=16, vocab_size=256, decoder_start_token_id=0,
             pad_token_id=0),
        16, 512, loss=_hf_seq2seq, attn="eager")),
    "mixtral_moe": ("MoE decoder LM", _hf(
        "MixtralForCausalLM", "MixtralConfig",
        dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
             num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
             num_local_experts=8, num_experts_per_tok=2,
             max_position_embeddings=4096),
        dict(TINY_LM, num_local_experts=4, num_experts_per_tok=2),
        4, 1024, experts="grouped_mm")),
    "dit_b2": ("diffusion transformer", _dit),
    "mamba": ("state-space LM", _hf(
        "MambaForCausalLM", "MambaConfig",
        dict(hidden_size=768, state_size=16, num_hidden_layers=4,
             vocab_size=32000),
        dict(hidden_size=64, state_size=8, num_hidden_layers=2,
             vocab_size=256),
        8, 128, attn="eager")),
    "gpt2_medium": ("decoder LM, dropout", _hf(
        "GPT2LMHeadModel", "GPT2Config",
        dict(n_embd=1024, n_layer=24, n_head=16, n_positions=1024,
             vocab_size=50257),
        dict(n_embd=64, n_layer=2, n_head=4, n_positions=64, vocab_size=256),
        8, 1024)),
    "llama8l": ("decoder LM, GQA, RoPE", _llama8l),
}


def export_one(name, tiny, device, out_dir):
    family, build = CORPUS[name]
    torch.manual_seed(0)
    module, (x, y), meta = build(tiny)
    dtype = torch.float32 if tiny else torch.bfloat16
    module = module.to(device=device, dtype=dtype)
    module.train()
    x = x.to(device=device, dtype=dtype if x.is_floating_point() else None)
    y = y.to(device)
    path = os.path.join(out_dir, f"graph_{name}.json")
    start = time.perf_counter()
    graph = lt.export_training_step(
        module, (x, y), lambda loss: loss, path,
        meta={"model": name, "family": family, **meta})
    t = graph["totals"]
    return {"model": name, "family": family, "ok": True,
            "export_s": round(time.perf_counter() - start, 1),
            "nodes": t["n_nodes"], "fwd_ops": t["n_fwd_ops"],
            "bwd_ops": t["n_bwd_ops"], "saved": t["n_saved"],
            "saved_gb": round(t["saved_bytes_unique_storage"] / 1e9, 3),
            "step_ms": t.get("step_ms_eager"),
            "peak_gb": (t["peak_bytes_eager"] / 1e9
                        if t.get("peak_bytes_eager") else None),
            "graphs": len(graph.get("graphs", [])),
            "warnings": len(graph.get("warnings", [])),
            "bytes": os.path.getsize(path)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="directory for the graphs")
    p.add_argument("--models", default=",".join(CORPUS),
                   help="comma-separated subset of: " + ",".join(CORPUS))
    p.add_argument("--tiny", action="store_true",
                   help="toy sizes on CPU, no op times (a capture check)")
    p.add_argument("--deadline", type=float, default=None,
                   help="seconds after which no further model starts")
    p.add_argument("--summary", default=None,
                   help="write the per-model results as JSON here")
    args = p.parse_args()
    names = args.models.split(",")
    unknown = [n for n in names if n not in CORPUS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; "
                f"known: {', '.join(CORPUS)}")
    os.makedirs(args.out, exist_ok=True)
    device = "cpu" if args.tiny or not torch.cuda.is_available() else "cuda"
    start = time.perf_counter()
    rows = []
    for name in names:
        if args.deadline and time.perf_counter() - start > args.deadline:
            rows.append({"model": name, "ok": False, "error": "deadline"})
            continue
        try:
            rows.append(export_one(name, args.tiny, device, args.out))
        except Exception as e:  # report and go on with the next model
            traceback.print_exc()
            rows.append({"model": name, "ok": False,
                         "error": f"{type(e).__name__}: {e}"[:300]})
        finally:
            if device == "cuda":
                torch.cuda.empty_cache()
        print(json.dumps(rows[-1]), flush=True)
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump(rows, f, indent=1)
    print("| model | family | nodes | fwd/bwd ops | saved GB | eager ms "
          "| peak GB | export s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if not r["ok"]:
            print(f"| {r['model']} | failed: {r['error'][:80]} |")
            continue
        print(f"| {r['model']} | {r['family']} | {r['nodes']} "
              f"| {r['fwd_ops']}/{r['bwd_ops']} | {r['saved_gb']} "
              f"| {r['step_ms']} | {r['peak_gb']} | {r['export_s']} |")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
