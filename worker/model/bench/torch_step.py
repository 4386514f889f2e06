#!/usr/bin/env python3
"""PyTorch CPU side of `make bench` (bench_model_train): the same Qwen2-shaped
model, batch and generation as the C bench, timed the same way.

Builds a transformers Qwen2ForCausalLM from the shape arguments with random
weights in fp32, then
  1. training step: NS sequences of L tokens (a [NS, L] batch: the same
     attention and FLOPs as the C bench's packed batch, since neither attends
     across sequences), forward + cross-entropy + backward + grad-norm clip
     (1.0) + torch.optim.AdamW (lr 1e-4, betas 0.9/0.95, eps 1e-8, wd 0.1);
     one warm-up step, then the median of --runs steps;
  2. generation: batch B of P-token prompts, exactly NEW new tokens each by
     sampling at temperature 1 (top-k/top-p off) with the KV cache.
Threads: torch.set_num_threads(--threads) (intra-op); the C bench passes its
own thread count. Prints one JSON line: tokens/s by wall time, and the CPU
seconds (all threads) so a loaded machine can be read through. Run by the C bench; by hand:
  python3 worker/model/bench/torch_step.py --threads 1
"""
import argparse
import json
import statistics
import time

import torch
import transformers


def main():
    ap = argparse.ArgumentParser()
    for name, default in [("threads", 1), ("vocab", 8192), ("hidden", 512), ("inter", 1408),
                          ("layers", 4), ("heads", 8), ("kv_heads", 2), ("seqs", 4),
                          ("seq_len", 256), ("gen_batch", 8), ("gen_prompt", 32), ("gen_new", 32),
                          ("runs", 3)]:
        ap.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(
        vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.inter,
        num_hidden_layers=a.layers, num_attention_heads=a.heads,
        num_key_value_heads=a.kv_heads, max_position_embeddings=4096, rms_norm_eps=1e-6,
        rope_theta=10000.0, tie_word_embeddings=False, use_sliding_window=False,
        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    model = transformers.Qwen2ForCausalLM(cfg).float()
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1)
    ids = torch.randint(0, a.vocab, (a.seqs, a.seq_len))

    def step():
        opt.zero_grad(set_to_none=False)
        logits = model(input_ids=ids).logits
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, a.vocab), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    model.train()
    step()
    times, cpus = [], []
    for _ in range(a.runs):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    step_s, step_cpu = statistics.median(times), statistics.median(cpus)

    model.eval()
    prompts = ids.reshape(-1)[: a.gen_batch * a.gen_prompt].reshape(a.gen_batch, a.gen_prompt)
    gen_kw = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                  max_new_tokens=a.gen_new, min_new_tokens=a.gen_new, pad_token_id=0,
                  eos_token_id=None, attention_mask=torch.ones_like(prompts))
    with torch.no_grad():
        model.generate(prompts[:, :4], **{**gen_kw, "max_new_tokens": 2, "min_new_tokens": 2,
                                          "attention_mask": torch.ones_like(prompts[:, :4])})
        t0, c0 = time.perf_counter(), time.process_time()
        out = model.generate(prompts, **gen_kw)
        gen_s, gen_cpu = time.perf_counter() - t0, time.process_time() - c0
    made = (out.shape[1] - a.gen_prompt) * a.gen_batch
    print(json.dumps({
        "torch": torch.__version__, "transformers": transformers.__version__,
        "threads": torch.get_num_threads(), "params": n_params,
        "train_ms_per_step": step_s * 1e3, "train_cpu_s_per_step": step_cpu,
        "train_tokens_per_s": a.seqs * a.seq_len / step_s,
        "gen_new_tokens": made, "gen_s": gen_s, "gen_cpu_s": gen_cpu, "gen_tokens_per_s": made / gen_s,
    }))


if __name__ == "__main__":
    main()
