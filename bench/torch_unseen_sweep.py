"""Models Lethe never saw, through `lethe.torch.backend` on the CPU (issue
16: unseen models must not break what a user hits at once): each model of
torchvision and transformers below, built small with random weights, is
compiled by plain `torch.compile` and by Lethe's backend at a share budget,
one training step each; the table gives whether Lethe's compiled and
trained, and its loss and gradient norm against plain compile's (dropout
and stochastic depth off: a stochastic step is not comparable). A model
that plain `torch.compile` itself fails on is listed as n/a, not as
Lethe's failure. With --at-least, a model whose budget Lethe refuses as
below its least is compiled again at the least it named (bytes): a least
that Lethe reports must compile and train.

    python3 bench/torch_unseen_sweep.py [--budget 90%] [--at-least] [MODEL ...]

Needs torch >= 2.9, torchvision and transformers (the torch venv of
scripts/test.sh has torch; pip install torchvision transformers), and
Lethe's native library (LETHE_BUILD_DIR or an installed wheel).
"""
import argparse
import math
import sys
import time
import traceback
import warnings

import torch
import torch.nn as nn

import lethe
import lethe.torch as lt


def _vision(name):
    import torchvision.models as tvm
    net = getattr(tvm, name)(num_classes=10)
    x, y = torch.randn(32, 3, 64, 64), torch.randint(0, 10, (32,))
    return net, (x, y), lambda m, x, y: nn.functional.cross_entropy(m(x), y)


def _vision_net(net):
    x, y = torch.randn(32, 3, 64, 64), torch.randint(0, 10, (32,))
    return net, (x, y), lambda m, x, y: nn.functional.cross_entropy(m(x), y)


def _vit():
    from torchvision.models.vision_transformer import VisionTransformer
    return _vision_net(VisionTransformer(
        image_size=64, patch_size=8, num_layers=2, num_heads=4,
        hidden_dim=64, mlp_dim=128, num_classes=10))


def _swin():
    from torchvision.models.swin_transformer import SwinTransformer
    return _vision_net(SwinTransformer(
        patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4],
        window_size=[4, 4], num_classes=10))


def _lm(model, config, **fields):
    import transformers
    cfg = getattr(transformers, config)(vocab_size=100, **fields)
    net = getattr(transformers, model)(cfg)
    net.config.use_cache = False
    ids = torch.randint(0, 100, (8, 128))
    return net, (ids, ids), \
        lambda m, a, b: m(input_ids=a, labels=b).loss


_ATTN = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
             num_attention_heads=4)
# BERT-style encoders' dropout, off.
_NO_DROP = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
MODELS = {
    "resnet18": lambda: _vision("resnet18"),
    "mobilenet_v3_small": lambda: _vision("mobilenet_v3_small"),
    "efficientnet_b0": lambda: _vision("efficientnet_b0"),
    "densenet121": lambda: _vision("densenet121"),
    "shufflenet_v2_x0_5": lambda: _vision("shufflenet_v2_x0_5"),
    "gpt2": lambda: _lm("GPT2LMHeadModel", "GPT2Config", n_layer=2,
                        n_embd=64, n_head=4, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0),
    "llama": lambda: _lm("LlamaForCausalLM", "LlamaConfig",
                         num_key_value_heads=2, **_ATTN),
    "mistral": lambda: _lm("MistralForCausalLM", "MistralConfig",
                           num_key_value_heads=2, **_ATTN),
    "opt": lambda: _lm("OPTForCausalLM", "OPTConfig", num_hidden_layers=2,
                       hidden_size=64, ffn_dim=128, num_attention_heads=4,
                       word_embed_proj_dim=64, dropout=0.0,
                       attention_dropout=0.0, layerdrop=0.0),
    "gpt_neox": lambda: _lm("GPTNeoXForCausalLM", "GPTNeoXConfig", **_ATTN),
    "phi": lambda: _lm("PhiForCausalLM", "PhiConfig", **_ATTN),
    "bart": lambda: _lm("BartForConditionalGeneration", "BartConfig",
                        encoder_layers=2, decoder_layers=2, d_model=64,
                        encoder_ffn_dim=128, decoder_ffn_dim=128,
                        encoder_attention_heads=4,
                        decoder_attention_heads=4, dropout=0.0,
                        attention_dropout=0.0, activation_dropout=0.0),
    "distilbert": lambda: _lm("DistilBertForMaskedLM", "DistilBertConfig",
                              n_layers=2, dim=64, hidden_dim=128, n_heads=4,
                              dropout=0.0, attention_dropout=0.0),
    "gemma": lambda: _lm("GemmaForCausalLM", "GemmaConfig",
                         num_key_value_heads=1, head_dim=16, **_ATTN),
    # Added 2026-11-27: more families (vision transformers built small,
    # encoders with shared or relative attention, an encoder-decoder,
    # mixture-of-experts, ALiBi, a state-space model).
    "vit_small": _vit,
    "swin_small": _swin,
    "convnext_tiny": lambda: _vision("convnext_tiny"),
    "regnet_y_400mf": lambda: _vision("regnet_y_400mf"),
    "squeezenet1_1": lambda: _vision("squeezenet1_1"),
    "bert": lambda: _lm("BertForMaskedLM", "BertConfig", **_NO_DROP,
                        **_ATTN),
    "roberta": lambda: _lm("RobertaForMaskedLM", "RobertaConfig",
                           **_NO_DROP, **_ATTN),
    "albert": lambda: _lm("AlbertForMaskedLM", "AlbertConfig",
                          embedding_size=32, **_NO_DROP, **_ATTN),
    "deberta_v2": lambda: _lm("DebertaV2ForMaskedLM", "DebertaV2Config",
                              **_NO_DROP, **_ATTN),
    "electra": lambda: _lm("ElectraForMaskedLM", "ElectraConfig",
                           embedding_size=64, **_NO_DROP, **_ATTN),
    "t5": lambda: _lm("T5ForConditionalGeneration", "T5Config",
                      num_layers=2, num_decoder_layers=2, d_model=64,
                      d_ff=128, d_kv=16, num_heads=4, dropout_rate=0.0,
                      decoder_start_token_id=0),
    "qwen2": lambda: _lm("Qwen2ForCausalLM", "Qwen2Config",
                         num_key_value_heads=2, **_ATTN),
    "mixtral": lambda: _lm("MixtralForCausalLM", "MixtralConfig",
                           num_key_value_heads=2, num_local_experts=4,
                           num_experts_per_tok=2, **_ATTN),
    "qwen2_moe": lambda: _lm("Qwen2MoeForCausalLM", "Qwen2MoeConfig",
                             num_key_value_heads=2, num_experts=4,
                             num_experts_per_tok=2,
                             moe_intermediate_size=64,
                             shared_expert_intermediate_size=64, **_ATTN),
    "falcon": lambda: _lm("FalconForCausalLM", "FalconConfig",
                          num_hidden_layers=2, hidden_size=64,
                          num_attention_heads=4, hidden_dropout=0.0,
                          attention_dropout=0.0),
    "bloom": lambda: _lm("BloomForCausalLM", "BloomConfig", n_layer=2,
                         hidden_size=64, n_head=4, hidden_dropout=0.0,
                         attention_dropout=0.0),
    "gptj": lambda: _lm("GPTJForCausalLM", "GPTJConfig", n_layer=2,
                        n_embd=64, n_head=4, rotary_dim=8, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0),
    "phi3": lambda: _lm("Phi3ForCausalLM", "Phi3Config",
                        num_key_value_heads=2, pad_token_id=0, **_ATTN),
    "starcoder2": lambda: _lm("Starcoder2ForCausalLM", "Starcoder2Config",
                              num_key_value_heads=2, residual_dropout=0.0,
                              embedding_dropout=0.0, attention_dropout=0.0,
                              **_ATTN),
    "mamba": lambda: _lm("MambaForCausalLM", "MambaConfig",
                         num_hidden_layers=2, hidden_size=64, state_size=8,
                         expand=2),
}


# Refusals followed at most: each compiled graph of a model (one per
# graph break) names its own least, so a model of several graphs may be
# refused once per graph whose least is above the last one named.
_LEAST_TRIES = 4


def _least_named(e):
    """The least budget of the InfeasibleBudgetError in `e`'s chain, in the
    form the budget was given (a share, else bytes), or None."""
    c, seen = e, []
    while c is not None and c not in seen:
        if isinstance(c, lethe.InfeasibleBudgetError):
            return c.least_share or (
                None if c.least_feasible_budget is None
                else str(c.least_feasible_budget))
        seen.append(c)
        c = c.__cause__ or c.__context__
    return None


def _lethe_step(net, inputs, loss_fn, budget):
    """One step under Lethe's backend; Lethe's warnings."""
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _step(net, inputs, loss_fn, torch.compile(
            net, backend=lt.backend(budget=budget), dynamic=False))
    said = sorted({str(w.message)[len("Lethe: "):][:70] for w in caught
                   if str(w.message).startswith("Lethe: ")})
    return got, said


def _step(net, inputs, loss_fn, run):
    net.zero_grad(set_to_none=True)
    loss = loss_fn(run, *inputs)
    loss.backward()
    grad = math.sqrt(sum(float(p.grad.float().pow(2).sum())
                         for p in net.parameters() if p.grad is not None))
    return float(loss.detach()), grad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", default=list(MODELS))
    ap.add_argument("--budget", default="90%")
    ap.add_argument("--at-least", action="store_true",
                    help="where the budget is refused as below the least, "
                    "compile again at the least Lethe named")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, budget {args.budget}, CPU")
    print("| model | Lethe | s | loss | loss Δ (rel.) | grad norm Δ (rel.) "
          "| Lethe's warnings |")
    print("|---|---|---|---|---|---|---|")
    failed = 0
    for name in args.models:
        start = time.time()
        torch.manual_seed(0)
        try:
            net, inputs, loss_fn = MODELS[name]()
            net.train()
            for m in net.modules():
                if isinstance(m, nn.Dropout) \
                        or type(m).__name__ == "StochasticDepth":
                    m.p = 0.0
            torch._dynamo.reset()
            try:
                ref = _step(net, inputs, loss_fn, torch.compile(
                    net, dynamic=False))
            except Exception as e:  # noqa: BLE001 (not Lethe's to judge)
                why = str(e).strip().splitlines()[0][:120]
                print(f"| {name} | n/a: plain compile failed | "
                      f"{time.time() - start:.0f} | | | | "
                      f"{type(e).__name__}: {why} |", flush=True)
                traceback.print_exc(file=sys.stderr)
                continue
            verdict, budget = "ok", args.budget
            for tries in range(1, _LEAST_TRIES + 1):
                try:
                    got, said = _lethe_step(net, inputs, loss_fn, budget)
                    break
                except Exception as e:  # noqa: BLE001 (retried or reported)
                    least = _least_named(e) if args.at_least else None
                    if least is None or tries == _LEAST_TRIES:
                        raise
                    budget = least
                    verdict = f"ok at the least named, {least}" + (
                        f" ({tries} refusals)" if tries > 1 else "")
            print(f"| {name} | {verdict} | {time.time() - start:.0f} | "
                  f"{ref[0]:.5f} | {abs(got[0] - ref[0]) / abs(ref[0]):.1e} "
                  f"| {abs(got[1] - ref[1]) / ref[1]:.1e} | "
                  f"{'; '.join(said)} |", flush=True)
        except Exception as e:  # noqa: BLE001 (the table says what broke)
            failed += 1
            chain, c = [], e
            while c is not None and c not in chain:
                chain.append(c)
                c = c.__cause__ or c.__context__
            # Lethe's own error where dynamo wrapped one, else the innermost.
            ours = [c for c in chain if type(c).__module__.startswith(
                "lethe")] or chain[-1:]
            why = str(ours[0]).strip().splitlines()[0][:200]
            print(f"| {name} | **failed** | {time.time() - start:.0f} | "
                  f"| | | {type(ours[0]).__name__}: {why} |", flush=True)
            traceback.print_exc(file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
