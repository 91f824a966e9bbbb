#!/usr/bin/env python3
"""PyTorch eager and torch.compile on the benchmark cases of `examples/bench`.

Same cases (names and shapes), same timing method and the same JSON format
(`nvfuser-bench/1`) as the Rust benchmark, so `scripts/bench/report.py` can join them:

  - CUDA events on the current stream around one call of the case's function;
  - before every repeat, L2 is flushed by writing (zeroing) a buffer of twice the L2 size,
    then a short GPU sleep is queued so that the host's launch overhead is hidden behind it
    (the events measure the GPU's work, as the Rust side's events around the launch do);
  - the median over --repeats (default 30) after --warmup calls;
  - GB/s = logical bytes (each input and output once) / time;
  - percent of a device-to-device copy of --copy-mib (default 1024) MiB measured the same
    way in the same run.

Each case's function is what a PyTorch user writes (F.gelu, torch.softmax, F.layer_norm,
F.rms_norm, ...) on bf16 tensors; the same function is run eagerly and through
torch.compile. torch.compile's output is checked against eager's on every case.

Usage (on the GPU machine, from the project root):
    python3 scripts/bench/torch_baseline.py                 # writes benches/results/torch-{eager,compile}.{json,md}
    python3 scripts/bench/torch_baseline.py --cases rmsnorm --no-sweep
    python3 scripts/bench/torch_baseline.py --device cpu    # tiny shapes, host timing: a smoke test of this script
"""

import argparse
import datetime
import json
import os
import statistics
import sys
import time

FORMAT = "nvfuser-bench/1"
SWEEP_HIDDEN = [1024, 2048, 4096, 8192, 16384, 32768]
SWEEP_ELEMENTS = 1 << 28
EPS = 1e-5
DROPOUT_P = 0.1
# Cases whose output is random (a dropout mask drawn per call): checked by shape only.
RANDOM_KERNELS = {"dropout_residual_layernorm"}


def make_cases(shrink):
    """The cases as (name, group, kernel, shape, dtype, input specs, output numel, fn
    factory, note). `shrink` divides every dim (CPU smoke runs)."""
    import torch
    import torch.nn.functional as F

    def s(n, k=shrink):
        return max(n // k, 1)

    bf16, f32 = torch.bfloat16, torch.float32

    def rms_norm(x, w):
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (x.shape[-1],), w, EPS)
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()
        return y.to(x.dtype)

    def dropout_residual_layernorm(x, residual, w, b):
        h = F.dropout(x, DROPOUT_P, training=True) + residual
        return h, F.layer_norm(h, (h.shape[-1],), w, b, EPS)

    def causal_softmax(x):
        s = x.shape[-1]
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
        return torch.softmax((x.float() * 0.088388346).masked_fill(mask, float("-inf")), -1).to(x.dtype)

    fns = {
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "silu_mul": lambda g, u: F.silu(g) * u,
        "silu_mul_sliced": lambda x: F.silu(x[:, : x.shape[1] // 2]) * x[:, x.shape[1] // 2 :],
        "softmax": lambda x: torch.softmax(x, dim=-1),
        "layernorm": lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, EPS),
        "rmsnorm": rms_norm,
        "inner_sum": lambda x: x.sum(1),
        "outer_sum": lambda x: x.sum(0),
        "transpose": lambda x: x.t().contiguous(),
        # Backward cases: the forward whose gradient is timed (see `backward`).
        "softmax_bwd": lambda x: torch.softmax(x, dim=-1),
        "layernorm_bwd": lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, EPS),
        "rmsnorm_bwd": rms_norm,
        "gelu_bwd_bias": lambda x, b: F.gelu(x + b),
        # Data movement with math (the Movement issue's cases).
        "rope": lambda x, cos, sin: x * cos[:, None, :]
        + torch.cat((-x[..., 64:], x[..., :64]), -1) * sin[:, None, :],
        "cross_entropy_fwd": lambda logits, labels: F.cross_entropy(
            logits.float(), labels.view(-1), reduction="none"),
        "cross_entropy_bwd": lambda logits, labels: F.cross_entropy(
            logits.float(), labels.view(-1), reduction="none"),
        "embedding": lambda table, ids: F.embedding(ids, table) * 64.0,
        "kv_append": lambda cache, new: torch.cat((cache, new), 1),
        "head_split": lambda x: (x.float() * 0.088388346).to(torch.bfloat16).permute(0, 2, 1, 3).contiguous(),
        "dropout_residual_layernorm": dropout_residual_layernorm,
        "causal_softmax": causal_softmax,
        "cumsum_f32": lambda x: torch.cumsum(x, 1),
        "cumsum_bf16": lambda x: torch.cumsum(x, 1),
        "cumsum_cols_f32": lambda x: torch.cumsum(x, 0),
        "topk_f32": lambda x: torch.topk(x, 64, 1),
        "topk8_f32": lambda x: torch.topk(x, 8, 1),
        "topk_vocab_f32": lambda x: torch.topk(x, 50, 1),
        "sort_f32": lambda x: torch.sort(x, dim=1, stable=True),
        "batchnorm": lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True, eps=EPS),
    }
    # Backward cases: inputs (dy, forward input, parameters...); the timed call is
    # autograd's backward of the forward's output for dy, giving the gradients of the
    # input and of every parameter, as nvFuser's Python benchmarks time backwards.
    backward = {"softmax_bwd", "layernorm_bwd", "rmsnorm_bwd", "gelu_bwd_bias", "cross_entropy_bwd"}

    cases = []

    def add(name, kernel, shape, dtype, inputs, out_numel, note, out_dtype=None, nbytes=None):
        # An input spec is (shape, dtype), or (shape, ("index", bound)) for int64 indices.
        group = "sweep" if name.startswith("sweep/") else "main"
        cases.append(dict(name=name, group=group, kernel=kernel, shape=list(shape), dtype=dtype,
                          inputs=inputs, out_numel=out_numel, fn=fns[kernel], note=note,
                          backward=kernel in backward, out_dtype=out_dtype or dtype, nbytes=nbytes))

    def norm(kernel, name, n, h):
        x = ([n, h], bf16)
        w = ([h], bf16)
        inputs = {"softmax": [x], "softmax_bwd": [x, x], "layernorm": [x, w, w], "rmsnorm": [x, w]}[kernel]
        note = {"softmax": "torch.softmax(x, -1)", "layernorm": "F.layer_norm (weight + bias)",
                "rmsnorm": "F.rms_norm (weight)",
                "softmax_bwd": "autograd backward of torch.softmax(x, -1): dy and y in, dx out"}[kernel]
        add(name, kernel, [n, h], bf16, inputs, n * h, note)

    def bwd(kernel, name, n, h):
        x = ([n, h], bf16)
        w = ([h], bf16)
        inputs = {"layernorm_bwd": [x, x, w, w], "rmsnorm_bwd": [x, x, w], "gelu_bwd_bias": [x, x, w]}[kernel]
        note = {"layernorm_bwd": "autograd backward of F.layer_norm (weight + bias): dx, dw, db",
                "rmsnorm_bwd": "autograd backward of F.rms_norm (weight): dx, dw",
                "gelu_bwd_bias": "autograd backward of F.gelu(x + b): dx, db"}[kernel]
        add(name, kernel, [n, h], bf16, inputs, n * h, note)

    n, h = s(16384), s(32768)
    add("gelu_tanh", "gelu_tanh", [n, h], bf16, [([n, h], bf16)], n * h, "F.gelu(x, approximate='tanh')")
    n, h = s(8192), s(14336)
    add("silu_mul", "silu_mul", [n, h], bf16, [([n, h], bf16), ([n, h], bf16)], n * h,
        "F.silu(gate) * up, two inputs [N, H]")
    add("silu_mul_sliced", "silu_mul_sliced", [n, 2 * h], bf16, [([n, 2 * h], bf16)], n * h,
        "F.silu(x[:, :H]) * x[:, H:], one input [N, 2H]")
    n, h = s(32768), s(8192)
    for kernel in ["softmax", "layernorm", "rmsnorm"]:
        norm(kernel, kernel, n, h)
    norm("rmsnorm", "rmsnorm_8192x4096", s(8192), s(4096))
    norm("softmax_bwd", "softmax_bwd", s(32768), s(8192))
    norm("softmax_bwd", "softmax_bwd_4096x32000", s(4096), s(32000))
    n, h = s(32768), s(8192)
    add("inner_sum", "inner_sum", [n, h], f32, [([n, h], f32)], n, "x.sum(1)")
    n, h = s(8192), s(32768)
    add("outer_sum", "outer_sum", [n, h], f32, [([n, h], f32)], h, "x.sum(0)")
    n = s(8192)
    add("transpose", "transpose", [n, n], f32, [([n, n], f32)], n * n, "x.t().contiguous()")

    t, heads = s(16384), s(32)
    add("rope", "rope", [t, heads, 128], bf16, [([t, heads, 128], bf16), ([t, 128], bf16), ([t, 128], bf16)],
        t * heads * 128, "x * cos[:, None] + cat(-x[..., 64:], x[..., :64]) * sin[:, None]")
    n, h = s(8192), s(32768)
    add("cumsum_f32", "cumsum_f32", [n, h], f32, [([n, h], f32)], n * h, "torch.cumsum(x, 1)")
    add("cumsum_bf16", "cumsum_bf16", [n, h], bf16, [([n, h], bf16)], n * h, "torch.cumsum(x, 1)")
    add("cumsum_cols_f32", "cumsum_cols_f32", [n, h], f32, [([n, h], f32)], n * h, "torch.cumsum(x, 0)")
    # Sorting: bytes are the input read and the values (f32) and indices (i64) written.
    n, h = s(4096), s(32768)
    for name, k in [("topk_f32", 64), ("topk8_f32", 8)]:
        add(name, name, [n, h], f32, [([n, h], f32)], n * k,
            f"torch.topk(x, {k}, 1): values f32 + indices i64", nbytes=n * h * 4 + n * k * 12)
    add("sort_f32", "sort_f32", [n, h], f32, [([n, h], f32)], n * h,
        "torch.sort(x, dim=1, stable=True): values f32 + indices i64", nbytes=n * h * 16)
    n, v = s(64), s(128256)
    add("topk_vocab_f32", "topk_vocab_f32", [n, v], f32, [([n, v], f32)], n * 50,
        "torch.topk(logits, 50, 1) over a vocabulary of 128256: values f32 + indices i64",
        nbytes=n * v * 4 + n * 50 * 12)
    n, v = s(4096), s(32000)
    add("cross_entropy_fwd", "cross_entropy_fwd", [n, v], bf16, [([n, v], bf16), ([n, 1], ("index", v))], n,
        "F.cross_entropy(logits.float(), labels, reduction='none')", out_dtype=f32)
    # Its backward: the loss gradient g [N] as dy; the gradient of the logits out.
    add("cross_entropy_bwd", "cross_entropy_bwd", [n, v], bf16,
        [([n], f32), ([n, v], bf16), ([n, 1], ("index", v))], n * v,
        "autograd backward of F.cross_entropy(logits.float(), labels, reduction='none'): g, logits, labels in, dlogits out",
        nbytes=n * 4 + n * v * 2 + n * 8 + n * v * 2)
    vocab, d, tokens = s(32000), s(4096), s(8192)
    # Bytes as for ours: the ids, the rows read and the output (not the whole table).
    add("embedding", "embedding", [tokens, d], bf16, [([vocab, d], bf16), ([tokens], ("index", vocab))],
        tokens * d, "F.embedding(ids, table) * 64", nbytes=tokens * 8 + 2 * tokens * d * 2)
    b, q = s(32), s(2048)
    add("causal_softmax", "causal_softmax", [b, q, q], bf16, [([b, q, q], bf16)], b * q * q,
        "softmax((x.float() / sqrt(128)).masked_fill(triu(ones, 1), -inf), -1) in bf16")
    n, h = s(16384), s(4096)
    add("dropout_residual_layernorm", "dropout_residual_layernorm", [n, h], bf16,
        [([n, h], bf16), ([n, h], bf16), ([h], bf16), ([h], bf16)], 2 * n * h,
        "h = F.dropout(x, 0.1) + residual; y = F.layer_norm(h) (weight + bias); h and y out")
    b, t, heads = s(4), s(4096), s(32)
    add("head_split", "head_split", [b, t, heads, 128], bf16, [([b, t, heads, 128], bf16)], b * t * heads * 128,
        "(x.float() * 1/sqrt(128)).bfloat16().permute(0, 2, 1, 3).contiguous()")
    b, length = s(256), s(2048)
    add("kv_append", "kv_append", [b, length, 128], bf16, [([b, length - 1, 128], bf16), ([b, 1, 128], bf16)],
        b * length * 128, "torch.cat((cache, new), 1)")

    for kernel in ["layernorm_bwd", "rmsnorm_bwd"]:
        for n, h in [(8192, 4096), (4096, 8192)]:
            bwd(kernel, f"{kernel}_{s(n)}x{s(h)}", s(n), s(h))
    bwd("gelu_bwd_bias", "gelu_bwd_bias", s(8192), s(16384))

    m, c = s(32 * 56 * 56), s(256)
    add("batchnorm_fwd_nhwc", "batchnorm", [m, c], bf16, [([m, c], bf16), ([c], f32), ([c], f32)], m * c,
        "F.batch_norm(x [N*H*W, C], training=True) with weight and bias")

    total = SWEEP_ELEMENTS // (shrink * shrink)
    for kernel in ["softmax", "softmax_bwd", "layernorm", "rmsnorm", "layernorm_bwd", "rmsnorm_bwd"]:
        for h in SWEEP_HIDDEN:
            h = s(h)
            (bwd if kernel.endswith("norm_bwd") else norm)(kernel, f"sweep/{kernel}/h{h}", max(total // h, 1), h)
    return cases


class Timer:
    """CUDA events with an L2 flush before each repeat, or host time on the CPU."""

    def __init__(self, device, flush_bytes):
        import torch
        self.torch = torch
        self.device = device
        self.cuda = device.type == "cuda"
        self.flush_buf = torch.empty(flush_bytes, dtype=torch.uint8, device=device) if self.cuda else None

    def flush(self):
        if self.cuda:
            self.flush_buf.zero_()
            # Keep the GPU busy while the host launches the timed work (about 50 us).
            self.torch.cuda._sleep(100_000)

    def time_us(self, fn, repeats, warmup):
        torch = self.torch
        for _ in range(warmup):
            fn()
        samples = []
        for _ in range(repeats):
            self.flush()
            if self.cuda:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) * 1e3)
            else:
                t0 = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - t0) * 1e6)
        return samples


def stats(samples):
    return dict(time_us=statistics.median(samples), min_us=min(samples), max_us=max(samples))


def random_input(torch, shape, dtype, device, gen):
    if isinstance(dtype, tuple):  # ("index", bound): int64 indices in [0, bound)
        return torch.randint(0, dtype[1], shape, generator=gen, device=device, dtype=torch.int64)
    return (torch.rand(shape, generator=gen, device=device, dtype=torch.float32) * 4 - 2).to(dtype)


def dtype_name(torch, dtype):
    return {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}[dtype]


def run(args):
    import torch

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("torch_baseline: CUDA is not available (use --device cpu for a smoke test)")
    shrink = 1 if cuda else 64
    if not cuda:
        args.repeats = min(args.repeats, 3)
    cases = make_cases(shrink)
    if args.no_sweep:
        cases = [c for c in cases if c["group"] != "sweep"]
    if args.sweep_only:
        cases = [c for c in cases if c["group"] == "sweep"]
    if args.cases:
        wanted = [w for w in args.cases.split(",") if w]
        cases = [c for c in cases if any(w in c["name"] for w in wanted)]

    if cuda:
        props = torch.cuda.get_device_properties(device)
        device_name = props.name
        l2 = getattr(props, "L2_cache_size", 50 << 20)
        flush_bytes = max(2 * l2, 8 << 20)
    else:
        device_name = "cpu (tiny shapes: not a benchmark)"
        flush_bytes = 0
    timer = Timer(device, flush_bytes)

    copy = None
    if cuda:
        nbytes = args.copy_mib << 20
        src = torch.zeros(nbytes, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        st = stats(timer.time_us(lambda: dst.copy_(src), args.repeats, 3))
        copy = dict(bytes=nbytes, time_us=st["time_us"], gb_s=2 * nbytes / (st["time_us"] * 1e-6) / 1e9)
        del src, dst
        print(f"torch_baseline: copy of {args.copy_mib} MiB: {copy['time_us']:.1f} us, {copy['gb_s']:.0f} GB/s")

    impls = {"torch-eager": [], "torch-compile": []}
    gen = torch.Generator(device=device)
    for i, case in enumerate(cases):
        gen.manual_seed(1000 + i)
        inputs = [random_input(torch, shape, dt, device, gen) for shape, dt in case["inputs"]]
        in_bytes = sum(t.numel() * t.element_size() for t in inputs)
        out_bytes = case["out_numel"] * torch.empty((), dtype=case["out_dtype"]).element_size()
        nbytes = case["nbytes"] or in_bytes + out_bytes
        fn = case["fn"]
        if case["backward"]:
            # (dy, x, parameters...): the forward runs once, untimed; each call is its
            # backward, giving the gradients of x and of every parameter.
            # Integer inputs (labels) are not leaves.
            dy, rest = inputs[0], inputs[1:]
            inputs = [dy] + [t.detach().requires_grad_(True) if t.is_floating_point() else t
                             for t in rest]
            # Bytes as the fused kernel moves them: dy and the saved tensor in, dx out
            # (parameters and their gradients are one row each), unless the case says.
            nbytes = case["nbytes"] or 3 * dy.numel() * dy.element_size()
        eager_out = None
        for impl in impls:
            r = dict(name=case["name"], group=case["group"], kernel=case["kernel"], shape=case["shape"],
                     dtype=dtype_name(torch, case["dtype"]), bytes=nbytes, status="error", error=None,
                     check="not run", time_us=None, min_us=None, max_us=None, gb_s=None, pct_of_copy=None,
                     call_us=None, scheduler="eager" if impl == "torch-eager" else "inductor",
                     kernel_name=None, grid=None, block=None, registers=None, first_call_ms=None, params=None,
                     note=case["note"])
            try:
                if impl == "torch-eager":
                    f = fn
                else:
                    torch._dynamo.reset()
                    f = torch.compile(fn, dynamic=False)
                if case["backward"]:
                    fwd = f
                    y = fwd(*inputs[1:])

                    def f(dy, *args, y=y):
                        leaves = [a for a in args if a.requires_grad]
                        grads = torch.autograd.grad(y, leaves, dy, retain_graph=True)
                        return grads[0] if len(grads) == 1 else grads
                t0 = time.perf_counter()
                out = f(*inputs)
                if cuda:
                    torch.cuda.synchronize()
                r["first_call_ms"] = (time.perf_counter() - t0) * 1e3
                if impl == "torch-eager":
                    eager_out = out
                    r["check"] = "reference (eager)"
                elif case["kernel"] in RANDOM_KERNELS:
                    # Each call draws its own dropout mask: shapes only.
                    outs = out if isinstance(out, tuple) else (out,)
                    wants = eager_out if isinstance(eager_out, tuple) else (eager_out,)
                    ok = all(o.shape == w.shape for o, w in zip(outs, wants))
                    r["check"] = "random (shapes match eager)" if ok else "MISMATCH vs eager"
                else:
                    tol = dict(rtol=1.6e-2, atol=1e-3) if case["dtype"] != torch.float32 else \
                        dict(rtol=1e-4, atol=1e-6 * max(case["shape"]))
                    outs = out if isinstance(out, tuple) else (out,)
                    wants = eager_out if isinstance(eager_out, tuple) else (eager_out,)
                    ok = all(torch.allclose(o.float(), w.float(), **tol) for o, w in zip(outs, wants))
                    r["check"] = "matches eager" if ok else "MISMATCH vs eager"
                del out
                st = stats(timer.time_us(lambda: f(*inputs), args.repeats, args.warmup))
                r.update(st)
                r["gb_s"] = nbytes / (st["time_us"] * 1e-6) / 1e9
                if copy:
                    r["pct_of_copy"] = 100 * r["gb_s"] / copy["gb_s"]
                r["status"] = "ok" if "MISMATCH" not in r["check"] else "mismatch"
            except Exception as e:  # a failing case is recorded, the others still run
                r["error"] = f"{type(e).__name__}: {e}"
            impls[impl].append(r)
            gbs = f"{r['gb_s']:.0f}" if r["gb_s"] else "-"
            print(f"  {impl:<13} {r['name']:<28} {r['time_us'] or 0:>10.1f} us {gbs:>6} GB/s  {r['error'] or r['check']}")
        del inputs, eager_out
        if cuda:
            torch.cuda.empty_cache()

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    timing = (f"CUDA events around one call, L2 flushed before every repeat by writing {flush_bytes >> 20} MiB "
              f"then a ~50 us GPU sleep to hide host launch overhead, median of {args.repeats} after "
              f"{args.warmup} warm-up calls; GB/s = logical bytes (each input and output once) / time. "
              f"PyTorch {torch.__version__}.") if cuda else "Host time on the CPU (smoke run)."
    out_dir = args.out or ("benches/results" if cuda else None)
    for impl, results in impls.items():
        report = dict(format=FORMAT, implementation=impl, device=device_name, date=date, repeats=args.repeats,
                      timing=timing, l2_flush_bytes=flush_bytes, peak_gb_s=None, copy=copy, cases=results)
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)
            with open(os.path.join(out_dir, f"{impl}.json"), "w") as f:
                json.dump(report, f, indent=2)
                f.write("\n")
            with open(os.path.join(out_dir, f"{impl}.md"), "w") as f:
                f.write(markdown(report))
            print(f"torch_baseline: wrote {out_dir}/{impl}.json and .md")
        else:
            print(markdown(report))


def markdown(r):
    def opt(v, fmt):
        return "-" if v is None else format(v, fmt)

    lines = [f"# {r['implementation']} on {r['device']}", "", f"Date: {r['date']}. {r['timing']}"]
    if r.get("copy"):
        c = r["copy"]
        lines.append(f"Device-to-device copy of {c['bytes'] >> 20} MiB: {c['time_us']:.1f} us, "
                     f"{c['gb_s']:.0f} GB/s (the 100% of `% copy`).")
    lines += ["", "| case | shape | dtype | time (us) | GB/s | % copy | check |", "|---|---|---|---:|---:|---:|---|"]
    for c in r["cases"]:
        check = f"{c['status']}: {c['error']}" if c["error"] else c["check"]
        lines.append(f"| {c['name']} | {c['shape']} | {c['dtype']} | {opt(c['time_us'], '.1f')} | "
                     f"{opt(c['gb_s'], '.0f')} | {opt(c['pct_of_copy'], '.1f')} | {check.splitlines()[0][:120]} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--cases", default="", help="only cases whose name contains one of these (comma-separated)")
    p.add_argument("--no-sweep", action="store_true")
    p.add_argument("--sweep-only", action="store_true")
    p.add_argument("--copy-mib", type=int, default=1024)
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", default=None, help="output folder (default benches/results on a GPU)")
    run(p.parse_args())


if __name__ == "__main__":
    main()
