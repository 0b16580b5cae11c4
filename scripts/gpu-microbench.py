#!/usr/bin/env python3
"""Kernel microbenchmarks on one NVIDIA GPU through PyTorch: the kernels the training stacks
run (cuBLAS GEMMs in bf16 and fp8, SDPA's flash / cuDNN / memory-efficient attention, eager
memory-bound ops, fused AdamW) and one eager training step of the model of
scenarios/execute/gpu-1x-h200.json. Part of scripts/gpu-check.sh; needs torch with CUDA.

    python3 scripts/gpu-microbench.py --out DIR [--quick]

Writes DIR/microbench.json (every case: shape, median time, rate; errors as strings) and
prints a summary. Timing: CUDA events around back-to-back launches, after warm-up, sized to
run >= --min-ms per repetition; the median of --reps repetitions. Inputs are random (never
zeros). FLOP counts: GEMM 2MNK; attention 4 B H S^2 D forward (half with a causal mask),
2.5x that backward (the FlashAttention papers' convention). Bytes of memory-bound ops: each
input read once and each output written once (the least the op must move).
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback

import torch
import torch.nn.functional as F

DEV = "cuda"


def smi(fields):
    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
        return r.stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"error: {e}"


def bench(fn, min_ms, reps, warmup=3):
    """Median milliseconds of one call of fn (CUDA events, back-to-back launches)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    torch.cuda.synchronize()
    one = max(s.elapsed_time(e), 1e-3)
    n = max(1, min(2000, int(math.ceil(min_ms / one))))
    times = []
    for _ in range(reps):
        s.record()
        for _ in range(n):
            fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / n)
    return statistics.median(times), n, (max(times) - min(times)) / statistics.median(times)


def gemm_shapes(quick):
    shapes = []
    sq = [256, 512, 1024, 2048, 4096, 8192, 16384]
    for s in sq:
        shapes.append(("square", s, s, s))
    # Layers of Llama 3 8B (h 4096, GQA 32/8 heads, ffn 14336) and 70B (h 8192, 64/8 heads,
    # ffn 28672) at 8192 tokens per microbatch, tensor parallel 1, 2, 4, 8: forward, dgrad
    # and wgrad shapes as stepcast prices them (model-reference 4.2: dgrad (M, K, N),
    # wgrad (K, N, M)).
    models = {"llama3-8b": (4096, 4096 + 2 * 1024, 14336), "llama3-70b": (8192, 8192 + 2 * 1024, 28672)}
    T = 8192
    for name, (h, qkv, ffn) in models.items():
        for tp in ([1, 8] if quick else [1, 2, 4, 8]):
            fwd = {"qkv": (T, qkv // tp, h), "proj": (T, h, h // tp), "fc1": (T, 2 * ffn // tp, h),
                   "fc2": (T, h, ffn // tp)}
            for op, (m, n, k) in fwd.items():
                shapes.append((f"{name}/tp{tp}/{op}", m, n, k))
                shapes.append((f"{name}/tp{tp}/{op}.dgrad", m, k, n))
                shapes.append((f"{name}/tp{tp}/{op}.wgrad", k, n, m))
    # Logits of a 128k vocabulary, and the small-dimension probes (M, N or K alone shrinks).
    shapes.append(("logits/h4096", T, 128256, 4096))
    for d in [64, 128, 256, 512, 1024, 2048, 4096]:
        shapes.append((f"small-m/{d}", d, 8192, 8192))
        shapes.append((f"small-n/{d}", 8192, d, 8192))
        shapes.append((f"small-k/{d}", 8192, 8192, d))
    if quick:
        shapes = shapes[:: max(1, len(shapes) // 20)]
    return shapes


def run_gemms(args, res):
    out = []
    e4m3 = getattr(torch, "float8_e4m3fn", None)
    for label, m, n, k in gemm_shapes(args.quick):
        a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=DEV, dtype=torch.bfloat16)
        c = torch.empty(m, n, device=DEV, dtype=torch.bfloat16)
        cases = [("bf16", lambda: torch.matmul(a, b, out=c))]
        if e4m3 is not None and not args.no_fp8:
            a8 = (a * 0.5).to(e4m3)
            b8 = (b.t().contiguous() * 0.5).to(e4m3).t()  # column-major K x N, as cuBLASLt fp8 wants
            one = torch.ones((), device=DEV, dtype=torch.float32)
            cases.append(("fp8", lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                                          out_dtype=torch.bfloat16, use_fast_accum=False)))
            cases.append(("fp8-fast-accum", lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                                                     out_dtype=torch.bfloat16, use_fast_accum=True)))
        for dtype, fn in cases:
            row = {"label": label, "m": m, "n": n, "k": k, "dtype": dtype}
            try:
                ms, iters, spread = bench(fn, args.min_ms, args.reps)
                row.update(time_s=ms * 1e-3, tflops=2.0 * m * n * k / (ms * 1e-3) / 1e12, iters=iters, spread=spread)
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {e}"
            out.append(row)
        del a, b, c
    res["gemm"] = out


def run_attention(args, res):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    out = []
    tokens, hidden = 16384, 2048  # the FlashAttention papers' setting: batch x seq = 16k, hidden 2048
    seqs = [512, 1024, 2048, 4096, 8192, 16384]
    if args.quick:
        seqs = [1024, 8192]
    for d in [128, 64]:
        heads = hidden // d
        for s in seqs:
            bsz = tokens // s
            for causal in [True, False]:
                q, k, v = (torch.randn(bsz, heads, s, d, device=DEV, dtype=torch.bfloat16, requires_grad=True)
                           for _ in range(3))
                dout = torch.randn(bsz, heads, s, d, device=DEV, dtype=torch.bfloat16)
                fwd_flops = 4.0 * bsz * heads * s * s * d * (0.5 if causal else 1.0)
                for name, be in backends.items():
                    row = {"kernel": name, "seq": s, "batch": bsz, "heads": heads, "head_dim": d, "causal": causal}
                    try:
                        with sdpa_kernel([be]):
                            def fwd():
                                with torch.no_grad():
                                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                            def fwdbwd():
                                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                                o.backward(dout)

                            t_f, _, _ = bench(fwd, args.min_ms, args.reps)
                            t_fb, _, _ = bench(fwdbwd, args.min_ms, args.reps)
                        t_b = max(t_fb - t_f, 1e-6)
                        row.update(fwd_s=t_f * 1e-3, bwd_s=t_b * 1e-3, fwd_tflops=fwd_flops / (t_f * 1e-3) / 1e12,
                                   bwd_tflops=2.5 * fwd_flops / (t_b * 1e-3) / 1e12)
                    except Exception as e:  # noqa: BLE001
                        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                    out.append(row)
                    q.grad = k.grad = v.grad = None
                del q, k, v, dout
    res["attention"] = out


def run_memory_bound(args, res):
    out = []
    T, h = (8192, 8192)  # 128 MiB of bf16 activations: twice the H200's 60 MiB L2
    F_ = 28672 // 8
    x = torch.randn(T, h, device=DEV, dtype=torch.bfloat16)
    y = torch.randn(T, h, device=DEV, dtype=torch.bfloat16)
    w = torch.randn(h, device=DEV, dtype=torch.bfloat16)
    bias = torch.randn(h, device=DEV, dtype=torch.bfloat16)
    z = torch.empty_like(x)
    g = torch.randn(T, 2 * F_, device=DEV, dtype=torch.bfloat16)
    e = 2  # bytes per bf16 element
    n = T * h
    cases = [
        ("copy", lambda: z.copy_(x), 2 * n * e),
        ("add (residual)", lambda: torch.add(x, y, out=z), 3 * n * e),
        ("rms_norm fwd", lambda: F.rms_norm(x, (h,), w), 2 * n * e),
        ("layer_norm fwd", lambda: F.layer_norm(x, (h,), w, bias), 2 * n * e),
        ("gelu fwd", lambda: F.gelu(x, approximate="tanh"), 2 * n * e),
        ("swiglu fwd (silu(a)*b, eager)", lambda: F.silu(g[:, :F_]) * g[:, F_:], 3 * T * F_ * e),
        ("dropout p=0.1 fwd", lambda: F.dropout(x, 0.1, training=True), 2 * n * e),
        ("softmax fwd", lambda: torch.softmax(x, dim=-1), 2 * n * e),
    ]
    e4m3 = getattr(torch, "float8_e4m3fn", None)
    if e4m3 is not None:
        def cast_fp8():
            amax = x.abs().amax()
            return (x * (448.0 / amax)).to(e4m3)
        cases.append(("fp8 cast with amax (eager)", cast_fp8, n * e + n))
    # Rotary embedding as eager PyTorch writes it (rotate_half): q of 8192 tokens x 64 heads x 128.
    q = torch.randn(T, 64, 128, device=DEV, dtype=torch.bfloat16)
    cos = torch.randn(T, 1, 128, device=DEV, dtype=torch.bfloat16)
    sin = torch.randn(T, 1, 128, device=DEV, dtype=torch.bfloat16)

    def rope():
        x1, x2 = q[..., :64], q[..., 64:]
        return q * cos + torch.cat((-x2, x1), dim=-1) * sin
    cases.append(("rope (eager rotate_half)", rope, 2 * q.numel() * e))
    # Cross entropy over a 128k vocabulary in fp32, forward and backward (Megatron upcasts the logits).
    V, Tl = 128256, 4096
    logits = torch.randn(Tl, V, device=DEV, dtype=torch.float32, requires_grad=True)
    target = torch.randint(0, V, (Tl,), device=DEV)

    def ce():
        logits.grad = None
        loss = F.cross_entropy(logits, target)
        loss.backward()
    cases.append(("cross_entropy fp32 fwd+bwd (128k vocab)", ce, 2 * Tl * V * 4))
    for op, fn, nbytes in cases:
        row = {"op": op, "bytes": nbytes}
        try:
            ms, iters, spread = bench(fn, args.min_ms, args.reps)
            row.update(time_s=ms * 1e-3, GBps=nbytes / (ms * 1e-3) / 1e9, iters=iters, spread=spread)
        except Exception as ex:  # noqa: BLE001
            row["error"] = f"{type(ex).__name__}: {ex}"
        out.append(row)
    del x, y, z, g, logits, q
    # Optimizer: AdamW over 256 M fp32 parameters (fused and foreach), and the gradient norm.
    P = 64 * 1024 * 1024 if args.quick else 256 * 1024 * 1024
    params = [torch.nn.Parameter(torch.randn(P // 64, device=DEV)) for _ in range(64)]
    for p in params:
        p.grad = torch.randn_like(p)
    for mode in ["fused", "foreach"]:
        opt = torch.optim.AdamW(params, lr=1e-4, **{mode: True})
        row = {"op": f"adamw step fp32 ({mode})", "bytes": P * 4 * 7, "params": P}  # read p,g,m,v; write p,m,v
        try:
            ms, iters, spread = bench(opt.step, args.min_ms, args.reps)
            row.update(time_s=ms * 1e-3, GBps=row["bytes"] / (ms * 1e-3) / 1e9, iters=iters, spread=spread)
        except Exception as ex:  # noqa: BLE001
            row["error"] = f"{type(ex).__name__}: {ex}"
        out.append(row)
        del opt
    row = {"op": "grad norm fp32 (clip_grad_norm_, foreach)", "bytes": P * 4, "params": P}
    try:
        ms, iters, spread = bench(lambda: torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True), args.min_ms, args.reps)
        row.update(time_s=ms * 1e-3, GBps=row["bytes"] / (ms * 1e-3) / 1e9, iters=iters, spread=spread)
    except Exception as ex:  # noqa: BLE001
        row["error"] = f"{type(ex).__name__}: {ex}"
    out.append(row)
    res["memory_bound"] = out


class Block(torch.nn.Module):
    def __init__(self, h, heads, kv, ffn):
        super().__init__()
        self.h, self.heads, self.kv, self.d = h, heads, kv, h // heads
        self.n1 = torch.nn.RMSNorm(h)
        self.qkv = torch.nn.Linear(h, (heads + 2 * kv) * self.d, bias=False)
        self.o = torch.nn.Linear(h, h, bias=False)
        self.n2 = torch.nn.RMSNorm(h)
        self.fc1 = torch.nn.Linear(h, 2 * ffn, bias=False)
        self.fc2 = torch.nn.Linear(ffn, h, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        qkv = self.qkv(self.n1(x)).view(b, s, self.heads + 2 * self.kv, self.d)
        q, k, v = qkv.split([self.heads, self.kv, self.kv], dim=2)

        def rot(t):
            t1, t2 = t[..., : self.d // 2], t[..., self.d // 2:]
            return t * cos + torch.cat((-t2, t1), dim=-1) * sin
        q, k = rot(q), rot(k)
        rep = self.heads // self.kv  # GQA by repeating K and V, as torchtitan's repeat_kv does
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2).repeat_interleave(rep, dim=1),
                                           v.transpose(1, 2).repeat_interleave(rep, dim=1), is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, self.h))
        u = self.fc1(self.n2(x))
        g, up = u.chunk(2, dim=-1)
        return x + self.fc2(F.silu(g) * up)


TRAIN_MODELS = {
    # The model of scenarios/execute/gpu-1x-h200.json: 1.53 B parameters, 8 microbatches of 2 x 4096.
    "1p5b": dict(L=16, h=2048, heads=16, kv=8, ffn=8192, V=128256, S=4096, mb=2, acc=8),
    # A small model (0.27 B with its 128k vocabulary), where the host's launches matter.
    "small": dict(L=12, h=768, heads=12, kv=4, ffn=2048, V=128256, S=2048, mb=4, acc=4),
}


def train_step(args, model, compiled):
    """One training step in PyTorch: fp32 parameters, bf16 autocast, SDPA causal (GQA by
    repeating K and V), fused AdamW, gradient clipping; eager, or each block under
    torch.compile (as torchtitan compiles per block)."""
    c = dict(TRAIN_MODELS[model])
    if args.quick:
        c["L"], c["acc"] = 2, 2
    L, h, heads, kv, ffn, V, S, mb, acc = (c[k] for k in ("L", "h", "heads", "kv", "ffn", "V", "S", "mb", "acc"))
    torch.manual_seed(1)
    emb = torch.nn.Embedding(V, h).to(DEV)
    blocks = torch.nn.ModuleList([Block(h, heads, kv, ffn) for _ in range(L)]).to(DEV)
    norm = torch.nn.RMSNorm(h).to(DEV)
    head = torch.nn.Linear(h, V, bias=False).to(DEV)
    params = list(emb.parameters()) + list(blocks.parameters()) + list(norm.parameters()) + list(head.parameters())
    n_params = sum(p.numel() for p in params)
    run_blocks = [torch.compile(b) for b in blocks] if compiled else list(blocks)
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
    d = h // heads
    inv = 1.0 / (500000 ** (torch.arange(0, d, 2, device=DEV).float() / d))
    ang = torch.outer(torch.arange(S, device=DEV).float(), inv)
    cos = torch.cat((ang.cos(), ang.cos()), -1)[None, :, None, :].to(torch.bfloat16)
    sin = torch.cat((ang.sin(), ang.sin()), -1)[None, :, None, :].to(torch.bfloat16)
    batches = [torch.randint(0, V, (mb, S + 1), device=DEV) for _ in range(acc)]

    def step():
        for tok in batches:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                x = emb(tok[:, :-1])
                for blk in run_blocks:
                    x = blk(x, cos, sin)
                logits = head(norm(x))
            loss = F.cross_entropy(logits.float().view(-1, V), tok[:, 1:].reshape(-1)) / acc
            loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)

    if args.sdpa != "default":  # force one SDPA backend for the whole step
        from torch.nn.attention import SDPBackend, sdpa_kernel
        forced = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[args.sdpa]
        inner = step

        def step():
            with sdpa_kernel([forced]):
                inner()
    t_warm = time.time()
    for _ in range(3 if compiled else 2):
        step()
    torch.cuda.synchronize()
    t_warm = time.time() - t_warm
    torch.cuda.reset_peak_memory_stats()
    times, host = [], []
    for _ in range(3 if args.quick else 5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        h0 = time.perf_counter()
        s.record()
        step()
        e.record()
        h1 = time.perf_counter()  # the host's time to issue the step (it runs ahead of the GPU)
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e-3)
        host.append(h1 - h0)
    t = statistics.median(times)
    tokens = mb * S * acc
    flops = 6.0 * n_params * tokens + 3 * 4.0 * mb * heads * S * S * d * 0.5 * L * acc  # + causal attention
    out = {"model": model, "compiled": compiled, "sdpa": args.sdpa,
           "what": "PyTorch " + ("torch.compile per block" if compiled else "eager")
           + ", fp32 params + bf16 autocast, SDPA causal (GQA), fused AdamW, grad clip",
           "layers": L, "hidden": h, "heads": heads, "kv_heads": kv, "ffn": ffn, "vocab": V, "seq": S,
           "microbatch": mb, "accumulation": acc, "params": n_params, "step_times_s": times,
           "host_issue_s": host, "warmup_s": t_warm,
           "step_time_s": t, "tokens_per_s": tokens / t, "model_tflops": flops / t / 1e12,
           "peak_memory_bytes": torch.cuda.max_memory_allocated(),
           "peak_reserved_bytes": torch.cuda.max_memory_reserved()}
    del blocks, run_blocks, opt, params
    return out


def run_train_step(args, res):
    runs = []
    for v in args.train.split(","):
        model, _, mode = v.partition(":")
        try:
            runs.append(train_step(args, model, mode == "compile"))
        except Exception as e:  # noqa: BLE001
            runs.append({"model": model, "compiled": mode == "compile", "error": f"{type(e).__name__}: {e}"})
        torch.cuda.empty_cache()
    res["train_step"] = runs


def run_sdpa_default(args, res):
    """Which kernels PyTorch's SDPA runs when no backend is forced, on the training steps'
    shape (2 x 16 heads x 4096 x 128, bf16, causal, forward and backward)."""
    out = {}
    try:
        out["priority_order"] = [str(b) for b in torch._C._get_sdp_priority_order()]
    except Exception as e:  # noqa: BLE001
        out["priority_order"] = f"{type(e).__name__}: {e}"
    q, k, v = (torch.randn(2, 16, 4096, 128, device=DEV, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    for _ in range(2):
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
        torch.cuda.synchronize()
    out["kernels"] = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
    res["sdpa_default"] = out


def moe_layer(args, T, E, k, h, F_, grouped, with_bwd):
    """One MoE layer's expert part as Megatron-Core's dropless path runs it: router GEMM,
    softmax and top-k (the choice then replaced by a balanced one), permute (sort by expert, gather rows), the experts' gated FFN (one
    grouped GEMM per matrix, torch._grouped_mm, or a loop of per-expert GEMMs as Transformer
    Engine's multi-stream GEMM launches them), unpermute (weighted scatter-add). Returns the
    median seconds of forward (and backward)."""
    torch.manual_seed(0)
    x = torch.randn(T, h, device=DEV, dtype=torch.bfloat16, requires_grad=with_bwd)
    wr = torch.randn(E, h, device=DEV, dtype=torch.bfloat16, requires_grad=with_bwd)
    w1 = (torch.randn(E, 2 * F_, h, device=DEV, dtype=torch.bfloat16) * 0.02).requires_grad_(with_bwd)
    w2 = (torch.randn(E, h, F_, device=DEV, dtype=torch.bfloat16) * 0.02).requires_grad_(with_bwd)
    dy = torch.randn(T, h, device=DEV, dtype=torch.bfloat16)
    # Forced balance (Megatron's moe_router_force_load_balancing, as the Qwen3-30B-A3B
    # benchmark ran): token t's j-th choice is expert (t k + j) mod E, so every expert gets
    # T k / E rows (512 here, a multiple of 16 as torch._grouped_mm wants).
    balanced = (torch.arange(T, device=DEV).unsqueeze(1) * k + torch.arange(k, device=DEV)) % E

    def layer():
        logits = x @ wr.t()
        probs, _ = torch.topk(torch.softmax(logits.float(), dim=-1), k, dim=-1)
        flat = balanced.reshape(-1)
        order = torch.argsort(flat, stable=True)
        rows = order // k
        counts = torch.bincount(flat, minlength=E)
        xp = x.index_select(0, rows)
        if grouped:
            offs = torch.cumsum(counts, 0).to(torch.int32)
            u = torch._grouped_mm(xp, w1.transpose(-2, -1), offs=offs)
            g, up = u.chunk(2, dim=-1)
            yp = torch._grouped_mm(F.silu(g) * up, w2.transpose(-2, -1), offs=offs)
        else:
            outs, start = [], 0
            for e, n in enumerate(counts.tolist()):  # host sync, as a per-expert loop needs the counts
                u = xp[start:start + n] @ w1[e].t()
                g, up = u.chunk(2, dim=-1)
                outs.append((F.silu(g) * up) @ w2[e].t())
                start += n
            yp = torch.cat(outs)
        yp = yp * probs.reshape(-1)[order].unsqueeze(-1).to(yp.dtype)
        y = torch.zeros(T, h, device=DEV, dtype=yp.dtype).index_add_(0, rows, yp)
        if with_bwd:
            y.backward(dy)
        return y

    ms, _, _ = bench(layer, args.min_ms, args.reps)
    return ms * 1e-3


def moe_parts(args, T, E, k, h, F_):
    """The forward of moe_layer's grouped case split into its parts, each timed alone:
    router (GEMM, softmax, top-k), permute (sort by expert, gather rows), the experts'
    two grouped GEMMs with the gated activation, unpermute (weight and scatter-add)."""
    torch.manual_seed(0)
    x = torch.randn(T, h, device=DEV, dtype=torch.bfloat16)
    wr = torch.randn(E, h, device=DEV, dtype=torch.bfloat16)
    w1 = torch.randn(E, 2 * F_, h, device=DEV, dtype=torch.bfloat16) * 0.02
    w2 = torch.randn(E, h, F_, device=DEV, dtype=torch.bfloat16) * 0.02
    flat = ((torch.arange(T, device=DEV).unsqueeze(1) * k + torch.arange(k, device=DEV)) % E).reshape(-1)
    order = torch.argsort(flat, stable=True)
    rows = order // k
    offs = torch.cumsum(torch.bincount(flat, minlength=E), 0).to(torch.int32)
    xp = x.index_select(0, rows)
    probs = torch.rand(T * k, device=DEV, dtype=torch.bfloat16)

    def router():
        return torch.topk(torch.softmax((x @ wr.t()).float(), dim=-1), k, dim=-1)

    def permute():
        o = torch.argsort(flat, stable=True)
        return x.index_select(0, o // k)

    def experts():
        u = torch._grouped_mm(xp, w1.transpose(-2, -1), offs=offs)
        g, up = u.chunk(2, dim=-1)
        return torch._grouped_mm(F.silu(g) * up, w2.transpose(-2, -1), offs=offs)

    yp = experts()

    def unpermute():
        return torch.zeros(T, h, device=DEV, dtype=yp.dtype).index_add_(0, rows, yp * probs[order].unsqueeze(-1))

    return {name: bench(fn, args.min_ms, args.reps)[0] * 1e-3
            for name, fn in [("router", router), ("permute", permute), ("experts", experts), ("unpermute", unpermute)]}


def run_moe(args, res):
    """Qwen3-30B-A3B's experts (128 of width 768, top-8, hidden 2048) at 8192 tokens (a
    microbatch of 2 x 4096): all 128 experts on one GPU, and one EP-8 rank's share (16 local
    experts, 8192 routed rows), grouped and looped, forward and forward + backward."""
    out = []
    h, F_, k = 2048, 768, 8
    for name, T, E in [("128 experts (ep 1)", 8192, 128), ("16 experts (one ep-8 rank's)", 8192, 16)]:
        kk = k if E == 128 else 1  # an EP-8 rank's 16 experts receive about T x 8 / 8 = T rows
        for grouped in [True, False]:
            row = {"case": name, "tokens": T, "experts": E, "top_k": kk, "hidden": h, "expert_ffn": F_,
                   "grouped": grouped}
            try:
                if grouped:
                    row["fwd_parts_s"] = moe_parts(args, T, E, kk, h, F_)
                row["fwd_s"] = moe_layer(args, T, E, kk, h, F_, grouped, False)
                row["fwd_bwd_s"] = moe_layer(args, T, E, kk, h, F_, grouped, True)
                row["expert_flops_fwd"] = 2.0 * T * kk * 3 * h * F_
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            out.append(row)
    res["moe"] = out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="few shapes, small sizes (a smoke test)")
    ap.add_argument("--min-ms", type=float, default=15.0, help="least time per repetition")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-fp8", action="store_true")
    ap.add_argument("--sdpa", default="default", choices=["default", "flash", "cudnn"],
                    help="SDPA backend of the training steps (default: PyTorch's own choice)")
    ap.add_argument("--only", default="gemm,attention,memory_bound,train_step")
    ap.add_argument("--train", default="1p5b:eager",
                    help="training steps to time, MODEL:eager|compile, comma-separated (models: "
                    + ", ".join(TRAIN_MODELS) + ")")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if not torch.cuda.is_available():
        print("gpu-microbench: torch sees no CUDA device", file=sys.stderr)
        return 1
    p = torch.cuda.get_device_properties(0)
    res = {"format": 1, "kind": "stepcast-gpu-microbench",
           "command": " ".join(["python3", "scripts/gpu-microbench.py"] + sys.argv[1:]),
           "gpu": p.name, "sms": p.multi_processor_count, "memory_bytes": p.total_memory,
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "python": platform.python_version(),
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "min_ms": args.min_ms, "reps": args.reps, "sections_s": {}, "clocks": {}}
    fields = "clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu"
    res["clocks"]["fields"] = fields
    res["clocks"]["start"] = smi(fields)
    status = 0
    for name in args.only.split(","):
        fn = {"gemm": run_gemms, "attention": run_attention, "memory_bound": run_memory_bound,
              "train_step": run_train_step, "sdpa_default": run_sdpa_default, "moe": run_moe}[name]
        t0 = time.time()
        try:
            fn(args, res)
        except Exception:  # noqa: BLE001
            res[name + "_error"] = traceback.format_exc()
            print(res[name + "_error"], file=sys.stderr)
            status = 1
        res["sections_s"][name] = round(time.time() - t0, 1)
        res["clocks"]["after_" + name] = smi(fields)
        torch.cuda.empty_cache()
        with open(os.path.join(args.out, "microbench.json"), "w") as f:
            json.dump(res, f, indent=1)
        print(f"gpu-microbench: {name} done in {res['sections_s'][name]} s", flush=True)
    summary(res)
    return status


def summary(res):
    print(f"# {res['gpu']}: torch {res['torch']}, CUDA {res['cuda']}, cuDNN {res['cudnn']}")
    for r in res.get("gemm", []):
        if r["label"].startswith("square") or "logits" in r["label"]:
            print(f"gemm {r['label']:>14} {r['m']:6d}x{r['n']:6d}x{r['k']:6d} {r['dtype']:>15} "
                  + (f"{r['tflops']:8.1f} TFLOP/s" if "tflops" in r else r.get("error", "")))
    for r in res.get("attention", []):
        if r["head_dim"] == 128 and r["seq"] in (512, 4096, 16384):
            print(f"attn {r['kernel']:>9} s={r['seq']:5d} d={r['head_dim']} causal={int(r['causal'])} "
                  + (f"fwd {r['fwd_tflops']:6.1f} bwd {r['bwd_tflops']:6.1f} TFLOP/s" if "fwd_tflops" in r
                     else r.get("error", "")))
    for r in res.get("memory_bound", []):
        print(f"mem  {r['op']:>42} " + (f"{r['GBps']:7.0f} GB/s" if "GBps" in r else r.get("error", "")))
    for r in res.get("moe", []):
        print(f"moe {r['case']:>30} {'grouped' if r['grouped'] else 'looped':>8}: " + (r["error"] if "error" in r else
              f"fwd {r['fwd_s'] * 1e3:7.3f} ms ({r['expert_flops_fwd'] / r['fwd_s'] / 1e12:5.0f} TFLOP/s of expert "
              f"GEMMs), fwd+bwd {r['fwd_bwd_s'] * 1e3:7.3f} ms"
              + ("".join(f", {n} {v * 1e3:.3f}" for n, v in r.get("fwd_parts_s", {}).items()))))
    if "sdpa_default" in res:
        print(f"sdpa default: order {res['sdpa_default'].get('priority_order')}")
        for kname in res["sdpa_default"].get("kernels", []):
            print(f"  kernel {kname[:150]}")
    for t in res.get("train_step", []):
        print(f"train step {t['model']} ({'compiled' if t['compiled'] else 'eager'}, sdpa {t.get('sdpa', 'default')}): "
              + (t["error"] if "error" in t else
                 f"{t['params'] / 1e9:.2f} B params, {t['step_time_s']:.3f} s, host issues it in "
                 f"{statistics.median(t['host_issue_s']):.3f} s, {t['tokens_per_s']:.0f} tokens/s, "
                 f"{t['model_tflops']:.0f} TFLOP/s, peak {t['peak_memory_bytes'] / 2**30:.1f} GiB"))


if __name__ == "__main__":
    sys.exit(main())
