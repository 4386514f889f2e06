#!/usr/bin/env python3
"""make_bench_model.py - writes the rollout bench's ~20M-parameter model as an
HF directory (config.json, model.safetensors in fp32, tokenizer.json,
tokenizer_config.json) and, given --gguf, its fp32 GGUF through llama.cpp's
own convert_hf_to_gguf.py.

The shape is bench_rollout_engine.c's (Qwen2: hidden 512, 4 layers, 8 / 2
heads of 64, intermediate 1408, vocabulary 8192, qkv bias, untied head);
weights are seeded uniform in [-0.04, 0.04] with norms at 1, as there, so
every column of the HTTP bench runs the same numbers. The tokenizer is a tiny
byte-level BPE (trained here on a few sentences) padded to the vocabulary;
the bench sends token ids, so it exists only because the GGUF converter and
AutoTokenizer need one.

The converter refuses a BPE pre-tokenizer whose fingerprint it does not list
(ours is new); rather than patch llama.cpp's file we run it with
get_vocab_base_pre answering "qwen2" (our pre-tokenizer is Qwen2's byte-level
split), the only change to its behaviour.

Usage: make_bench_model.py OUTDIR [--gguf OUT.gguf --llama LLAMA_CPP_DIR]
Needs numpy, tokenizers, safetensors; the GGUF step also transformers, torch
(the converter imports it) and llama.cpp's gguf-py (taken from LLAMA_CPP_DIR).
"""
import argparse
import json
import os
import runpy
import sys

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def write_hf(d):
    import numpy as np
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    os.makedirs(d, exist_ok=True)
    cfg = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 8192,
           "hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 4,
           "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
           "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
           "tie_word_embeddings": False, "hidden_act": "silu", "torch_dtype": "float32",
           "bos_token_id": None, "eos_token_id": 2, "use_sliding_window": False}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    h, i, L, kv = 512, 1408, 4, 2 * 64
    shapes = {"model.embed_tokens.weight": (8192, h), "model.norm.weight": (h,),
              "lm_head.weight": (8192, h)}
    for l in range(L):
        p = f"model.layers.{l}."
        shapes.update({p + "input_layernorm.weight": (h,),
                       p + "post_attention_layernorm.weight": (h,),
                       p + "self_attn.q_proj.weight": (h, h), p + "self_attn.q_proj.bias": (h,),
                       p + "self_attn.k_proj.weight": (kv, h), p + "self_attn.k_proj.bias": (kv,),
                       p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.v_proj.bias": (kv,),
                       p + "self_attn.o_proj.weight": (h, h),
                       p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h),
                       p + "mlp.down_proj.weight": (h, i)})
    g = np.random.default_rng(42)
    tensors = {}
    for name, shape in shapes.items():
        if "norm" in name:
            tensors[name] = np.ones(shape, dtype=np.float32)
        else:
            tensors[name] = g.uniform(-0.04, 0.04, shape).astype(np.float32)
    save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(["the cat sat on the mat", "hello world, hello there",
                             "tokens and tokenizers"] * 20, trainer)
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>",
                   "model_max_length": 4096}, f, indent=2)


def write_gguf(d, out, llama):
    sys.path.insert(0, os.path.join(llama, "gguf-py"))
    sys.path.insert(0, llama)
    import convert_hf_to_gguf as conv
    # The method moved between files across versions (convert_hf_to_gguf.py,
    # conversion/base.py): patch it on every class of llama.cpp's that has it.
    patched = 0
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None) or ""
        if not f.startswith(os.path.abspath(llama)):
            continue
        for obj in list(vars(mod).values()):
            if isinstance(obj, type) and "get_vocab_base_pre" in vars(obj):
                obj.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
                patched += 1
    if patched == 0:
        raise SystemExit("make_bench_model: no get_vocab_base_pre found in llama.cpp's converter")
    sys.argv = ["convert_hf_to_gguf.py", d, "--outtype", "f32", "--outfile", out]
    conv.main()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--gguf")
    ap.add_argument("--llama")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.outdir, "model.safetensors")):
        write_hf(a.outdir)
    if a.gguf and not os.path.exists(a.gguf):
        write_gguf(a.outdir, a.gguf, a.llama)


if __name__ == "__main__":
    main()
