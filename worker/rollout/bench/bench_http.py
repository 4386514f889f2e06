#!/usr/bin/env python3
"""bench_http.py - `make bench`'s rollout server figures, in one run, same
model, same threads: the real `areal-worker serve` over loopback beside
llama.cpp's llama-server (same weights, fp32 GGUF) and HF transformers
`generate`.

  1. generation throughput (new tokens/s) and mean time to first token at 1,
     8, 32 and 128 concurrent requests (32-token prompts of distinct random
     ids, 64 new tokens, ignore_eos, seeded temperature-1 sampling); the HTTP
     columns stream, so TTFT is the first token event; transformers' TTFT is
     its generate with max_new_tokens=1 at that batch;
  2. the GRPO shape: 16 prompts x n = 8 x 128 new tokens (128-token
     prompts) on areal-worker serve, with and without --disable-prefix-cache;
  3. the decode step's achieved memory bandwidth at 1 request (weights + mean
     KV read per token, over the token time) against measured copy bandwidth
     (numpy copy of 256 MiB, read + write, best of 3).

The client is Python threads with http.client, the same for both servers;
its own CPU time is charged to both alike (the machine is shared: keep the
thread count at 1, AREAL_BENCH_THREADS). A column that cannot run (no
llama-server built, torch missing) prints why and the table shows "-".

Beside wall-clock tokens/s each column reports tokens per CPU-second of the
server process (utime + stime from /proc, HTTP threads included; for
transformers the process time of its generate): on a machine shared with
other builds the wall-clock ratios swing with whoever else runs, the CPU
ratios much less. AREAL_BENCH_REPEAT=N runs each concurrency N times and
prints the spread (min-max) beside the median.

Usage: bench_http.py --worker PATH/areal-worker [--cache DIR] [--llama-server PATH
       --llama-dir DIR] [--quick]
"""
import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

PROMPT, NEW = 32, 64
CONC = [1, 8, 32, 128]
H, L, KVH, HD, V, I = 512, 4, 2, 64, 8192, 1408


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_ready(port, path, proc, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            r = c.getresponse()
            r.read()
            if r.status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("server not ready in time")


def stop(proc):
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def areal_body(ids, seed, new, n=1):
    return {"input_ids": ids, "stream": n == 1,
            "sampling_params": {"max_new_tokens": new, "temperature": 1.0, "ignore_eos": True,
                                "sampling_seed": seed, "n": n}}


def llama_body(ids, seed, new):
    return {"prompt": ids, "n_predict": new, "stream": True, "ignore_eos": True,
            "temperature": 1.0, "seed": seed, "cache_prompt": True, "top_k": 0, "top_p": 1.0,
            "min_p": 0.0}


def one_stream(port, path, body, kind, out):
    """POST a streaming request; out gets (ttft, new_tokens)."""
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"{kind}: HTTP {r.status}: {r.read()[:300]!r}")
    ttft, n = None, 0
    for line in r:
        if not line.startswith(b"data: "):
            continue
        data = line[6:].strip()
        if data == b"[DONE]":
            break
        j = json.loads(data)
        if kind == "areal":
            if isinstance(j, dict) and "error" in j:
                raise RuntimeError(f"areal: {j['error']}")
            n = j["meta_info"]["completion_tokens"]
        else:
            if j.get("stop"):
                n = j.get("tokens_predicted", n)
                break
            n += 1
        if ttft is None and n > 0:
            ttft = time.time() - t0
    c.close()
    out.append((ttft, n))


def cpu_s(pid):
    """utime + stime of process pid (all its threads) in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(port, kind, conc, rng, pid):
    path = "/generate" if kind == "areal" else "/completion"
    res, errs = [], []

    def run(i):
        ids = [rng_ids[i][k] for k in range(PROMPT)]
        body = areal_body(ids, 1000 + i, NEW) if kind == "areal" else llama_body(ids, 1000 + i, NEW)
        try:
            one_stream(port, path, body, kind, res)
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(str(e))

    rng_ids = [[rng.randrange(3, V) for _ in range(PROMPT)] for _ in range(conc)]
    ts = [threading.Thread(target=run, args=(i,)) for i in range(conc)]
    c0 = cpu_s(pid)
    t0 = time.time()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.time() - t0
    cpu = cpu_s(pid) - c0
    if errs:
        raise RuntimeError(errs[0])
    toks = sum(n for _, n in res)
    return toks / wall, sum(t for t, _ in res) / len(res), toks / max(cpu, 1e-3)


def areal_server(worker, model, threads, extra=()):
    port = free_port()
    p = subprocess.Popen([worker, "serve", "--model", model, "--port", str(port),
                          "--threads", str(threads), "--kv-memory", "512m",
                          "--max-running", "256", "--max-queued", "1024", *extra],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(port, "/health", p)
    return p, port


def llama_server(exe, gguf, threads):
    port = free_port()
    p = subprocess.Popen([exe, "-m", gguf, "--port", str(port), "--host", "127.0.0.1",
                          "-t", str(threads), "-tb", str(threads), "-np", "128",
                          "-c", str(128 * 128), "--threads-http", "140", "-b", "2048",
                          "-ub", "512", "--no-warmup"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(port, "/health", p)
    return p, port


def median_row(runs):
    """(tok/s, ttft, tok/cpu-s) medians of several runs, plus the tok/s spread."""
    mid = lambda k: sorted(r[k] for r in runs)[len(runs) // 2]
    return (mid(0), mid(1), mid(2), min(r[0] for r in runs), max(r[0] for r in runs))


def bench_server(start, kind, conc, repeat):
    p, port = start()
    rows = {}
    try:
        rng = random.Random(7)
        load(port, kind, 1, rng, p.pid)  # warm-up: page the weights in
        for c in conc:
            rows[c] = median_row([load(port, kind, c, rng, p.pid) for _ in range(repeat)])
    finally:
        stop(p)
    return rows


def bench_hf(model, threads, conc, repeat):
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(threads)
    m = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
    rows = {}
    g = torch.Generator().manual_seed(7)
    for c in conc:
        ids = torch.randint(3, V, (c, PROMPT), generator=g)
        kw = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, pad_token_id=0)
        runs = []
        for _ in range(repeat):
            with torch.no_grad():
                t0 = time.time()
                m.generate(ids, max_new_tokens=1, min_new_tokens=1, **kw)
                ttft = time.time() - t0
                t0, c0 = time.time(), time.process_time()
                out = m.generate(ids, max_new_tokens=NEW, min_new_tokens=NEW, **kw)
                wall, cpu = time.time() - t0, time.process_time() - c0
            n = (out.shape[1] - PROMPT) * c
            runs.append((n / wall, ttft, n / max(cpu, 1e-3)))
        rows[c] = median_row(runs)
    return rows


def grpo(worker, model, threads, prompts, disable):
    p, port = areal_server(worker, model, threads, ("--disable-prefix-cache",) if disable else ())
    try:
        rng = random.Random(11)
        errs = []

        def run(i):
            ids = [rng.randrange(3, V) for _ in range(128)]
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1200)
            c.request("POST", "/generate", json.dumps(areal_body(ids, 500 + i, 128, n=8)),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            b = r.read()
            if r.status != 200:
                errs.append(f"HTTP {r.status}: {b[:200]!r}")
            elif sum(x["meta_info"]["completion_tokens"] for x in json.loads(b)) != 8 * 128:
                errs.append("a sample came back short")
            c.close()

        ts = [threading.Thread(target=run, args=(i,)) for i in range(prompts)]
        c0, t0 = cpu_s(p.pid), time.time()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wall, cpu = time.time() - t0, cpu_s(p.pid) - c0
        if errs:
            raise RuntimeError(errs[0])
        return wall, cpu
    finally:
        stop(p)


def copy_bw():
    import numpy as np
    a = np.ones(256 << 18, dtype=np.float32)  # 256 MiB
    b = np.empty_like(a)
    best = 1e9
    for _ in range(3):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t0)
    return 2 * a.nbytes / best


def fmt(rows, c, k):
    return f"{rows[c][k]:9.1f}" if rows and c in rows else f"{'-':>9}"


def ratio(a, b, c, k, inv=False):
    if not a or not b or c not in a or c not in b:
        return f"{'-':>6}"
    r = b[c][k] / a[c][k] if inv else a[c][k] / b[c][k]
    return f"{r:5.2f}x"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--model", required=True, help="HF bench model directory")
    ap.add_argument("--gguf")
    ap.add_argument("--llama-server")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    threads = int(os.environ.get("AREAL_BENCH_THREADS", "1"))
    conc = [1, 8] if a.quick else CONC
    repeat = max(1, int(os.environ.get("AREAL_BENCH_REPEAT", "1")))
    print(f"rollout HTTP bench: Qwen2 bench model (~20M params, fp32), {threads} thread(s), "
          f"{PROMPT}-token prompts, {NEW} new tokens, median of {repeat}; load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    ours = bench_server(lambda: areal_server(a.worker, a.model, threads), "areal", conc, repeat)
    llama = hf = None
    if a.llama_server and a.gguf and os.path.exists(a.llama_server):
        try:
            llama = bench_server(lambda: llama_server(a.llama_server, a.gguf, threads), "llama",
                                 conc, repeat)
        except Exception as e:  # noqa: BLE001 - a column, not the bench
            print(f"llama.cpp column skipped: {e}")
    else:
        print("llama.cpp column skipped: no llama-server built (see bench_http.sh's message; "
              "worker/rollout/bench/llama_build.sh builds it)")
    try:
        hf = bench_hf(a.model, threads, conc, repeat)
    except Exception as e:  # noqa: BLE001
        print(f"transformers column skipped: {e}")
    print(f"\n{'conc':>4} | {'areal tok/s':>11} {'llama tok/s':>11} {'hf tok/s':>9} | "
          f"{'vs llama':>8} {'vs hf':>6} | {'areal TTFT':>10} {'llama TTFT':>10} {'hf TTFT':>9}"
          " (ms)")
    for c in conc:
        ms = lambda rows: (f"{rows[c][1] * 1e3:10.1f}" if rows and c in rows else f"{'-':>10}")
        print(f"{c:4d} | {fmt(ours, c, 0):>11} {fmt(llama, c, 0):>11} {fmt(hf, c, 0)} | "
              f"{ratio(ours, llama, c, 0):>8} {ratio(ours, hf, c, 0):>6} | {ms(ours)} {ms(llama)} "
              f"{ms(hf)[1:]}")
    print(f"\nper CPU-second of the server process (load-robust):\n{'conc':>4} | "
          f"{'areal tok/cpu-s':>15} {'llama':>9} {'hf':>9} | {'vs llama':>8} {'vs hf':>6} | "
          "tok/s spread (min-max) areal / llama / hf")
    spread = lambda rows: (f"{rows[c][3]:.0f}-{rows[c][4]:.0f}" if rows and c in rows else "-")
    for c in conc:
        print(f"{c:4d} | {fmt(ours, c, 2):>15} {fmt(llama, c, 2)} {fmt(hf, c, 2)} | "
              f"{ratio(ours, llama, c, 2):>8} {ratio(ours, hf, c, 2):>6} | {spread(ours)} / "
              f"{spread(llama)} / {spread(hf)}")
    prompts = 4 if a.quick else 16
    w_on, c_on = grpo(a.worker, a.model, threads, prompts, False)
    w_off, c_off = grpo(a.worker, a.model, threads, prompts, True)
    print(f"\nGRPO shape {prompts} prompts x n=8 x 128 new (128-token prompts): "
          f"prefix sharing {w_on:.2f} s ({c_on:.2f} CPU-s), without {w_off:.2f} s "
          f"({c_off:.2f} CPU-s): {w_off / w_on:.2f}x wall, {c_off / max(c_on, 1e-3):.2f}x CPU")
    n_params = V * H * 2 + H + L * (2 * H + H * H * 2 + H + 2 * (KVH * HD * H + KVH * HD) +
                                    3 * H * I)
    kv_tok = L * 2 * KVH * HD * 4
    step_bytes = n_params * 4 + kv_tok * (PROMPT + NEW / 2)
    bw = copy_bw()
    line = (f"decode at 1 request: {step_bytes / 1e6:.1f} MB read per token; copy bandwidth "
            f"{bw / 1e9:.2f} GB/s")
    for name, rows in (("areal", ours), ("llama.cpp", llama)):
        if rows and 1 in rows:
            got, per_cpu = rows[1][0] * step_bytes, rows[1][2] * step_bytes
            line += (f"; {name} {got / 1e9:.2f} GB/s ({100 * got / bw:.0f}% of copy; per "
                     f"CPU-second {per_cpu / 1e9:.2f} GB/s)")
    print(line)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
