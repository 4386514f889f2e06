#!/usr/bin/env python3
"""bench_trl.py - TRL's GRPOTrainer on CPU (PyTorch) on the demo's tiny model
(the HF directory `areal-worker tiny` writes: Qwen2 config.json,
tokenizer.json, model.safetensors), the same synthetic task (a+b= with a, b in
0..max_operand, answer = digits then <|endoftext|>, reward 1 for exactly that),
the same G, prompts per step, max new tokens, lr, clip and steps as the C
trainer's run. Prints seconds per step and the reward of the last steps;
writes a CSV of (step, wall_s, reward)."""
import argparse
import random
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=16)  # prompts per step
    ap.add_argument("--group", type=int, default=8)   # G
    ap.add_argument("--max-new", type=int, default=6)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--max-operand", type=int, default=49)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--csv", required=True)
    a = ap.parse_args()
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(a.threads)
    tok = PreTrainedTokenizerFast(tokenizer_file=a.model + "/tokenizer.json",
                                  eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    tok.padding_side = "left"
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    pairs = [(x, y) for x in range(a.max_operand + 1) for y in range(a.max_operand + 1)]
    random.Random(7).shuffle(pairs)
    pairs = pairs[: int(len(pairs) * 0.8)]  # the train split's share (synth.c: 20% held out)
    ds = Dataset.from_dict({"prompt": ["%d+%d=" % p for p in pairs],
                            "answer": [str(p[0] + p[1]) for p in pairs]})

    def reward(prompts, completions, completion_ids=None, answer=None, **kw):
        out = []
        for i, ids in enumerate(completion_ids):
            want = tok.encode(answer[i], add_special_tokens=False) + [eos]
            out.append(1.0 if list(ids) == want else 0.0)
        return out

    n = a.batch * a.group
    cfg = GRPOConfig(output_dir="/tmp/areal-bench-trl", use_cpu=True, report_to="none",
                     max_steps=a.steps, learning_rate=a.lr, lr_scheduler_type="constant",
                     weight_decay=0.0, max_grad_norm=1.0, per_device_train_batch_size=n,
                     generation_batch_size=n, num_generations=a.group,
                     max_completion_length=a.max_new, temperature=1.0, top_p=1.0, beta=0.0,
                     epsilon=0.2, gradient_checkpointing=False, logging_steps=1,
                     save_strategy="no", bf16=False, dataloader_num_workers=0, seed=1,
                     disable_tqdm=True)
    rows = []
    t0 = [None]

    class Clock(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            t0[0] = time.monotonic()

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                rows.append((state.global_step, time.monotonic() - t0[0], float(logs["reward"])))

    tr = GRPOTrainer(model=model, reward_funcs=[reward], args=cfg, train_dataset=ds,
                     processing_class=tok, callbacks=[Clock()])
    tr.train()
    wall = time.monotonic() - t0[0]
    with open(a.csv, "w") as f:
        f.write("step,wall_s,reward_mean\n")
        for s, w, r in rows:
            f.write("%d,%.3f,%.4f\n" % (s, w, r))
    last = [r for _, _, r in rows[-5:]] or [0.0]
    print("TRL %s GRPOTrainer (torch %s, CPU, %d threads): %d steps in %.1f s, %.3f s / step, "
          "reward (last 5 steps) %.3f" % (__import__("trl").__version__, torch.__version__,
                                          a.threads, a.steps, wall, wall / a.steps,
                                          sum(last) / len(last)))


if __name__ == "__main__":
    sys.exit(main())
