"""PyTorch's own decode attention, the peer for bench_cuda_decode: one query token per head
against a bf16 KV cache, batch 1, through torch.nn.functional.scaled_dot_product_attention
(PyTorch picks its fastest backend: FlashAttention or memory-efficient). GQA through
enable_gqa. Timed like bench_cuda_decode: CUDA graphs replayed between CUDA events, over enough
K/V copies to exceed 3x the L2 (one graph holds a step on each copy; time / copies). Prints
markdown rows.

    python3 bench/bench_sdpa_decode.py [--shape 0.6b|4b] [--tokens 4096,32768,131072] [--iters 200]
"""
import argparse
import sys

import torch
import torch.nn.functional as F

SHAPES = {"0.6b": (16, 8, 128), "4b": (32, 8, 128)}


def time_graph(fn, iters):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(10):
        g.replay()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        g.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / 1e3 / iters


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", choices=sorted(SHAPES), action="append")
    p.add_argument("--tokens", default="4096,32768,131072")
    p.add_argument("--iters", type=int, default=200)
    a = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_sdpa_decode: no CUDA device")
    shapes = a.shape or ["0.6b", "4b"]
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("| shape | tokens | variant | µs / step |")
    print("|---|---:|---|---:|")
    for name in shapes:
        H, KV, D = SHAPES[name]
        for T in [int(x) for x in a.tokens.split(",")]:
            kv_bytes = 2 * KV * T * D * 2
            copies = max(1, -(-3 * torch.cuda.get_device_properties(0).L2_cache_size // kv_bytes))
            q = torch.randn(1, H, 1, D, device="cuda", dtype=torch.bfloat16)
            ks = [torch.randn(1, KV, T, D, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
            vs = [torch.randn(1, KV, T, D, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
            outs = [None] * copies

            def step():  # outputs stay in the graph's memory pool: no extra copy kernel
                for i, (k, v) in enumerate(zip(ks, vs)):
                    outs[i] = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

            t = time_graph(step, a.iters) / copies
            print(f"| {name} | {T} | torch SDPA (enable_gqa) | {t * 1e6:.1f} |", flush=True)
            del q, ks, vs, outs
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
