#!/usr/bin/env python3
"""family_torch.py: tj_gemm (the GEMM family, through ctypes) against
PyTorch on the same inputs, in one process, on one GPU.

Sections (--only, comma-separated; default all):
  layouts   f16 and bf16, NN, NT and TN, at the issue's shapes (square
            1024-8192; M in {128, 4096} with (N, K) in {(4096, 4096),
            (11008, 4096), (4096, 11008)}; M in {1, 4, 16} x 4096 x 4096):
            time ratio torch.mm / tj_gemm (above 1: tj_gemm faster)
  sweep     bf16 NT (a Linear's forward: X times W stored N x K) and NN
            at shapes of real models and sizes that are multiples of no
            tile; geometric mean and lowest ratio
  epilogue  bf16 bias + GELU against torch._addmm_activation(use_gelu),
            and dGELU (with the bias gradient) against torch.mm followed
            by gelu_backward and a column sum
  accuracy  rel L2 against an fp32 product of the same inputs, tj_gemm
            beside torch.mm
  grouped   tj_grouped_gemm (bf16) against torch._grouped_mm at the MoE
            shapes of tj-bench's grouped section (T tokens, hidden H,
            expert FFN F, E experts, top-k), each direction (forward
            Y = X W[e], input gradient dX = dY W[e]^T, weight gradient
            dW[e] = X_e^T dY_e), uniform and skewed routing as tj-bench
            routes them; time ratio torch / tj and the largest relative
            difference between the two results (not in the default run)
Each time is the median of 5 replays of a CUDA graph of the calls (so
that Python's launch cost stays out of both), per call.  A
configuration's first build (its compile, into a fresh cache, the
driver's cache off) and first call are printed once, and every
configuration's first build again at the end.

  python3 bench/family_torch.py --lib path/to/libtokitai-jit.so
"""
import argparse
import ctypes as C
import math
import os
import sys
import tempfile
import time

import torch

F16, BF16, F32 = 1, 2, 3
NONE, BIAS, BIAS_GELU, DGELU = 0, 1, 2, 3
TYPES = {F16: torch.float16, BF16: torch.bfloat16, F32: torch.float32}


class Desc(C.Structure):
    _fields_ = [("size", C.c_size_t), ("a_type", C.c_int), ("b_type", C.c_int),
                ("c_type", C.c_int), ("trans_a", C.c_int), ("trans_b", C.c_int),
                ("m", C.c_int64), ("n", C.c_int64), ("k", C.c_int64),
                ("alpha", C.c_float), ("beta", C.c_float),
                ("a", C.c_void_p), ("lda", C.c_int64),
                ("b", C.c_void_p), ("ldb", C.c_int64),
                ("c", C.c_void_p), ("ldc", C.c_int64),
                ("epilogue", C.c_int), ("bias", C.c_void_p),
                ("aux", C.c_void_p), ("ldaux", C.c_int64),
                ("bias_grad", C.c_void_p)]


class GDesc(C.Structure):
    _fields_ = [("size", C.c_size_t), ("a_type", C.c_int), ("b_type", C.c_int),
                ("c_type", C.c_int), ("trans_a", C.c_int), ("trans_b", C.c_int),
                ("grouped", C.c_int), ("groups", C.c_int64),
                ("offs", C.c_void_p),
                ("m", C.c_int64), ("n", C.c_int64), ("k", C.c_int64),
                ("alpha", C.c_float), ("beta", C.c_float),
                ("a", C.c_void_p), ("lda", C.c_int64),
                ("b", C.c_void_p), ("ldb", C.c_int64), ("stride_b", C.c_int64),
                ("c", C.c_void_p), ("ldc", C.c_int64), ("stride_c", C.c_int64),
                ("epilogue", C.c_int), ("bias", C.c_void_p),
                ("aux", C.c_void_p), ("ldaux", C.c_int64),
                ("bias_grad", C.c_void_p)]


GROUPED_M, GROUPED_K = 1, 2


class Lib:
    def __init__(self, path):
        self.lib = C.CDLL(path)
        self.lib.tj_gemm.argtypes = [C.c_void_p, C.c_void_p, C.POINTER(Desc)]
        self.lib.tj_gemm_kernel.argtypes = [C.c_void_p, C.POINTER(Desc)]
        self.lib.tj_gemm_kernel.restype = C.c_char_p
        self.lib.tj_grouped_gemm.argtypes = [C.c_void_p, C.c_void_p,
                                             C.POINTER(GDesc)]
        self.lib.tj_grouped_gemm_kernel.argtypes = [C.c_void_p, C.POINTER(GDesc)]
        self.lib.tj_grouped_gemm_kernel.restype = C.c_char_p
        self.lib.tj_errmsg.argtypes = [C.c_void_p]
        self.lib.tj_errmsg.restype = C.c_char_p
        self.rt = C.c_void_p()
        rc = self.lib.tj_runtime_open(C.byref(self.rt), None)
        if rc != 0:
            sys.exit("tj_runtime_open: %d" % rc)
        self.seen = set()
        self.builds = {}

    def gemm(self, d):
        s = torch.cuda.current_stream().cuda_stream
        rc = self.lib.tj_gemm(self.rt, C.c_void_p(s), C.byref(d))
        if rc != 0:
            raise RuntimeError("tj_gemm: %d %s" % (rc, self.lib.tj_errmsg(self.rt)))

    def grouped(self, d):
        s = torch.cuda.current_stream().cuda_stream
        rc = self.lib.tj_grouped_gemm(self.rt, C.c_void_p(s), C.byref(d))
        if rc != 0:
            raise RuntimeError("tj_grouped_gemm: %d %s" %
                               (rc, self.lib.tj_errmsg(self.rt)))

    def _built(self, kernel_of, d):
        """The entry kernel_of (tj_gemm_kernel or tj_grouped_gemm_kernel)
        names for d, built (compiled into the fresh cache) the first time;
        that first build's wall time is kept in builds."""
        t0 = time.perf_counter()
        n = kernel_of(self.rt, C.byref(d))
        n = n.decode() if n else "?"
        if n not in self.builds:
            self.builds[n] = (time.perf_counter() - t0) * 1e3
        return n

    def grouped_name(self, d):
        return self._built(self.lib.tj_grouped_gemm_kernel, d)

    def name(self, d):
        return self._built(self.lib.tj_gemm_kernel, d)


def desc(a, b, c, ta, tb, epi=NONE, bias=None, aux=None, bias_grad=None):
    """The descriptor of c = op(a) op(b): a and b as stored (row-major)."""
    m, n = c.shape
    k = a.shape[0] if ta else a.shape[1]
    t = {torch.float16: F16, torch.bfloat16: BF16, torch.float32: F32}
    d = Desc()
    d.size = C.sizeof(Desc)
    d.a_type, d.b_type, d.c_type = t[a.dtype], t[b.dtype], t[c.dtype]
    d.trans_a, d.trans_b = ta, tb
    d.m, d.n, d.k, d.alpha, d.beta = m, n, k, 1.0, 0.0
    d.a, d.lda = a.data_ptr(), a.stride(0)
    d.b, d.ldb = b.data_ptr(), b.stride(0)
    d.c, d.ldc = c.data_ptr(), c.stride(0)
    d.epilogue = epi
    d.bias = bias.data_ptr() if bias is not None else None
    if aux is not None:
        d.aux, d.ldaux = aux.data_ptr(), aux.stride(0)
    d.bias_grad = bias_grad.data_ptr() if bias_grad is not None else None
    return d


def graph_ms(fn, calls):
    """Median per-call time of fn over 5 replays of a graph of calls."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / calls)
    times.sort()
    return times[2]


def calls_for(flop):
    """Enough calls to a graph for about 2 ms at 500 TFLOP/s, 5 to 200."""
    return max(5, min(200, int(2e-3 * 500e12 / max(flop, 1.0))))


def pair(lib, d, tj_fn, torch_fn, flop):
    """(tj ms, torch ms, entry), interleaved twice, each the lower."""
    name = lib.name(d)  # compiles a configuration the first time
    if name not in lib.seen:
        lib.seen.add(name)
        t0 = time.perf_counter()
        tj_fn()
        torch.cuda.synchronize()
        print("  first build of %s: %.0f ms, then its first call %.1f ms" %
              (name, lib.builds[name], (time.perf_counter() - t0) * 1e3))
    n = calls_for(flop)
    a = [graph_ms(tj_fn, n), graph_ms(torch_fn, n)]
    b = [graph_ms(tj_fn, n), graph_ms(torch_fn, n)]
    return min(a[0], b[0]), min(a[1], b[1]), name


def operands(m, n, k, ta, tb, dtype, gen):
    a = torch.randn((k, m) if ta else (m, k), device="cuda", generator=gen).to(dtype)
    b = torch.randn((n, k) if tb else (k, n), device="cuda", generator=gen).to(dtype)
    return a, b, (a.t() if ta else a), (b.t() if tb else b)


def row(label, tj, ref, flop, name):
    r = ref / tj
    print("%-34s %8.1f %8.1f TFLOP/s  ratio %5.3f  %s" %
          (label, flop / tj / 1e9, flop / ref / 1e9, r, name))
    return r


def summary(what, ratios):
    if ratios:
        g = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print("%s: %d shapes, geometric mean %.3f, lowest %.3f" %
              (what, len(ratios), g, min(ratios)))


def product(lib, m, n, k, ta, tb, dtype, gen):
    a, b, oa, ob = operands(m, n, k, ta, tb, dtype, gen)
    c = torch.empty((m, n), device="cuda", dtype=dtype)
    c2 = torch.empty_like(c)
    d = desc(a, b, c, ta, tb)
    flop = 2.0 * m * n * k
    return pair(lib, d, lambda: lib.gemm(d), lambda: torch.mm(oa, ob, out=c2), flop) + (flop,)


SQUARE = [(s, s, s) for s in (1024, 2048, 4096, 8192)]
TALL = [(mm, n, k) for mm in (128, 4096) for (n, k) in ((4096, 4096), (11008, 4096), (4096, 11008))]
SKINNY = [(mm, 4096, 4096) for mm in (1, 4, 16)]


def section_layouts(lib, gen):
    print("== layouts: tj_gemm against torch.mm (cuBLAS), TFLOP/s tj, torch")
    for dtype, dn in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        for ta, tb in ((0, 0), (0, 1), (1, 0)):
            lay = "%s%s" % ("nt"[ta], "nt"[tb])
            big, small = [], []
            for (m, n, k) in SQUARE + TALL + SKINNY:
                tj, ref, name, flop = product(lib, m, n, k, ta, tb, dtype, gen)
                r = row("%s %s %dx%dx%d" % (dn, lay, m, n, k), tj, ref, flop, name)
                (small if m <= 16 else big).append(r)
            summary("%s %s, M >= 128" % (dn, lay), big)
            summary("%s %s, M <= 16" % (dn, lay), small)


SWEEP = [
    # Llama-7B, Mistral-7B, Llama-13B, Llama-70B, Qwen-0.5B projections
    (4096, 4096, 4096), (4096, 12288, 4096), (4096, 11008, 4096),
    (4096, 4096, 11008), (4096, 14336, 4096), (4096, 4096, 14336),
    (4096, 6144, 4096), (4096, 5120, 5120), (4096, 15360, 5120),
    (4096, 13824, 5120), (4096, 5120, 13824), (2048, 8192, 8192),
    (2048, 10240, 8192), (2048, 28672, 8192), (2048, 8192, 28672),
    (8192, 896, 896), (8192, 1152, 896), (8192, 4864, 896),
    (8192, 896, 4864), (8192, 2048, 2048), (8192, 2560, 2048),
    # MoE experts (tokens routed to one expert)
    (512, 1408, 2048), (512, 2048, 1408), (256, 768, 2048),
    (1024, 1408, 1024), (640, 512, 1024), (1536, 2816, 1024),
    (384, 4096, 1408),
    # sizes that are multiples of no tile
    (1000, 3000, 997), (999, 999, 999), (3001, 2999, 1013),
    (127, 4093, 4099), (2047, 2047, 2047), (1531, 6143, 2017),
    (333, 1111, 3333), (5003, 1009, 2003), (777, 4096, 4096),
    (4096, 4095, 4096), (4096, 4096, 4095), (1, 3000, 997),
    (17, 4099, 1000), (100, 1000, 10000), (3000, 3000, 24),
    (8191, 257, 8191),
]


def section_sweep(lib, gen):
    print("== sweep: bf16, tj_gemm against torch.mm (cuBLAS)")
    for ta, tb in ((0, 1), (0, 0)):
        lay = "%s%s" % ("nt"[ta], "nt"[tb])
        ratios = []
        for (m, n, k) in SWEEP:
            tj, ref, name, flop = product(lib, m, n, k, ta, tb, torch.bfloat16, gen)
            ratios.append(row("bf16 %s %dx%dx%d" % (lay, m, n, k), tj, ref, flop, name))
        summary("sweep bf16 %s" % lay, ratios)


MLP = [(4096, 11008, 4096), (8192, 4096, 1024), (2048, 13824, 5120)]


def section_epilogue(lib, gen):
    print("== epilogue: bf16 MLP shapes (tokens x ffn x hidden)")
    for (m, n, k) in MLP:
        x = torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16)
        w = torch.randn(n, k, device="cuda", generator=gen).to(torch.bfloat16) * 0.05
        bias = torch.randn(n, device="cuda", generator=gen).to(torch.bfloat16)
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        u = torch.empty_like(y)
        flop = 2.0 * m * n * k
        d = desc(x, w, y, 0, 1, BIAS_GELU, bias=bias)
        ref = torch._addmm_activation(bias, x, w.t(), use_gelu=True)
        lib.gemm(d)
        torch.cuda.synchronize()
        diff = (y.float() - ref.float()).abs().max().item()
        tj, tr, name = pair(lib, d, lambda: lib.gemm(d),
                            lambda: torch._addmm_activation(bias, x, w.t(), use_gelu=True), flop)
        row("bias+gelu %dx%dx%d" % (m, n, k), tj, tr, flop, name)
        print("  largest difference from torch: %.3g" % diff)
        da = desc(x, w, y, 0, 1, BIAS_GELU, bias=bias, aux=u)
        tj, tr, name = pair(lib, da, lambda: lib.gemm(da),
                            lambda: torch._addmm_activation(bias, x, w.t(), use_gelu=True), flop)
        row("bias+gelu+aux %dx%dx%d" % (m, n, k), tj, tr, flop, name)
        # Backward through the second layer's product: dh = dy W2^T, then
        # du = dh * gelu'(u) and the bias gradient, against torch's three.
        dy = torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16)
        w2 = torch.randn(n, k, device="cuda", generator=gen).to(torch.bfloat16) * 0.05
        du = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        db = torch.empty(n, device="cuda", dtype=torch.float32)
        # w2: the second layer's weight stored ffn x hidden (n x k), as
        # y = h w2 keeps it: dh = dy w2^T, B stored n x k (NT).
        dd = desc(dy, w2, du, 0, 1, DGELU, aux=u, bias_grad=db)

        def torch_bwd():
            dh = torch.mm(dy, w2.t())
            g = torch.ops.aten.gelu_backward(dh, u, approximate="tanh")
            g.float().sum(0)
        tj, tr, name = pair(lib, dd, lambda: lib.gemm(dd), torch_bwd, flop)
        row("dgelu+bias_grad %dx%dx%d" % (m, n, k), tj, tr, flop, name)
        dn = desc(dy, w2, du, 0, 1, DGELU, aux=u)

        def torch_bwd_only():
            dh = torch.mm(dy, w2.t())
            torch.ops.aten.gelu_backward(dh, u, approximate="tanh")
        tj, tr, name = pair(lib, dn, lambda: lib.gemm(dn), torch_bwd_only, flop)
        row("dgelu %dx%dx%d" % (m, n, k), tj, tr, flop, name)


def section_accuracy(lib, gen):
    print("== accuracy: rel L2 against fp32 on the same inputs (tj, torch)")
    for dtype, dn in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        for ta, tb in ((0, 0), (0, 1), (1, 0), (1, 1)):
            for (m, n, k) in ((1000, 3000, 997), (4096, 4096, 4096), (128, 4096, 11008)):
                a, b, oa, ob = operands(m, n, k, ta, tb, dtype, gen)
                c = torch.empty((m, n), device="cuda", dtype=dtype)
                d = desc(a, b, c, ta, tb)
                lib.gemm(d)
                ref = oa.float() @ ob.float()
                th = torch.mm(oa, ob)
                torch.cuda.synchronize()
                e1 = ((c.float() - ref).norm() / ref.norm()).item()
                e2 = ((th.float() - ref).norm() / ref.norm()).item()
                print("%s %s%s %dx%dx%d  %.3e %.3e  %s %s" %
                      (dn, "nt"[ta], "nt"[tb], m, n, k, e1, e2,
                       "ok" if e1 <= e2 * 1.05 + 1e-7 else "WORSE", lib.name(d)))


# (T, H, F, E, k): tj-bench's grouped section's shapes.
MOE = [(8192, 1024, 1408, 8, 2), (16384, 2048, 1408, 64, 6),
       (8192, 2048, 768, 128, 8), (4096, 1024, 512, 32, 4)]


def route(E, rows, skewed):
    """Group end offsets (int32, on the GPU): equal shares, or expert e's
    share proportional to 1 / (e + 1), as tj-bench's grp_route."""
    h = sum(1.0 / (e + 1) for e in range(E))
    acc, ends = 0.0, []
    for e in range(E):
        acc += 1.0 / (e + 1) / h if skewed else 1.0 / E
        ends.append(rows if e == E - 1 else int(acc * rows))
    return torch.tensor(ends, device="cuda", dtype=torch.int32)


def gdesc(direction, x, w, y, out, offs, E):
    """tj-bench's grp_desc: forward out = x w[e], input gradient out =
    y w[e]^T, weight gradient out[e] = x_e^T y_e."""
    rows, H = x.shape
    F = y.shape[1]
    d = GDesc()
    d.size = C.sizeof(GDesc)
    d.a_type = d.b_type = d.c_type = BF16
    d.groups, d.offs, d.alpha, d.beta = E, offs.data_ptr(), 1.0, 0.0
    d.grouped = GROUPED_K if direction == "wgrad" else GROUPED_M
    if direction == "fwd":
        d.m, d.n, d.k = rows, F, H
        d.a, d.lda, d.b, d.ldb, d.stride_b = x.data_ptr(), H, w.data_ptr(), F, H * F
        d.c, d.ldc = out.data_ptr(), F
    elif direction == "dgrad":
        d.m, d.n, d.k, d.trans_b = rows, H, F, 1
        d.a, d.lda, d.b, d.ldb, d.stride_b = y.data_ptr(), F, w.data_ptr(), F, H * F
        d.c, d.ldc = out.data_ptr(), H
    else:
        d.m, d.n, d.k, d.trans_a = H, F, rows, 1
        d.a, d.lda, d.b, d.ldb = x.data_ptr(), H, y.data_ptr(), F
        d.c, d.ldc, d.stride_c = out.data_ptr(), F, H * F
    return d


def section_grouped(lib, gen):
    print("== grouped: bf16, tj_grouped_gemm against torch._grouped_mm, "
          "TFLOP/s tj, torch")
    if not hasattr(torch, "_grouped_mm"):
        print("torch %s has no torch._grouped_mm" % torch.__version__)
        return
    ratios = []
    for (T, H, F, E, k) in MOE:
        rows = T * k
        x = torch.randn(rows, H, device="cuda", generator=gen).to(torch.bfloat16)
        y = torch.randn(rows, F, device="cuda", generator=gen).to(torch.bfloat16)
        w = (torch.randn(E, H, F, device="cuda", generator=gen) * 0.05).to(torch.bfloat16)
        flop = 2.0 * rows * H * F
        for skewed in (0, 1):
            offs = route(E, rows, skewed)
            for direction in ("fwd", "dgrad", "wgrad"):
                label = "%s T=%d H=%d F=%d E=%d k=%d %s" % (
                    direction, T, H, F, E, k, "skewed" if skewed else "uniform")
                if direction == "fwd":
                    out = torch.empty(rows, F, device="cuda", dtype=torch.bfloat16)
                    ref_fn = lambda: torch._grouped_mm(x, w, offs=offs)
                elif direction == "dgrad":
                    out = torch.empty(rows, H, device="cuda", dtype=torch.bfloat16)
                    ref_fn = lambda: torch._grouped_mm(y, w.transpose(-2, -1), offs=offs)
                else:
                    out = torch.zeros(E, H, F, device="cuda", dtype=torch.bfloat16)
                    ref_fn = lambda: torch._grouped_mm(x.t(), y, offs=offs)
                d = gdesc(direction, x, w, y, out, offs, E)
                name = lib.grouped_name(d)
                try:
                    ref = ref_fn()
                except Exception as e:  # a layout or routing torch refuses
                    print("%-44s torch._grouped_mm failed: %s" % (label, e))
                    continue
                lib.grouped(d)
                torch.cuda.synchronize()
                diff = ((out.float() - ref.float()).abs().max() /
                        ref.float().abs().max().clamp(min=1e-30)).item()
                n = calls_for(flop)
                a = [graph_ms(lambda: lib.grouped(d), n), graph_ms(ref_fn, n)]
                b = [graph_ms(lambda: lib.grouped(d), n), graph_ms(ref_fn, n)]
                ratios.append(row(label, min(a[0], b[0]), min(a[1], b[1]), flop, name))
                print("  largest difference from torch, relative to its largest value: %.3g" % diff)
    summary("grouped bf16 against torch._grouped_mm", ratios)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", required=True)
    p.add_argument("--only", default="accuracy,layouts,epilogue,sweep")
    args = p.parse_args()
    if "TOKITAI_JIT_CACHE" not in os.environ:
        os.environ["TOKITAI_JIT_CACHE"] = os.path.join(tempfile.mkdtemp(), "cache.db")
    # The driver's compute cache off, so that a first build is a cold one.
    os.environ.setdefault("CUDA_CACHE_DISABLE", "1")
    print("device: %s, torch %s" % (torch.cuda.get_device_name(), torch.__version__))
    lib = Lib(args.lib)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    sections = {"accuracy": section_accuracy, "layouts": section_layouts,
                "epilogue": section_epilogue, "sweep": section_sweep,
                "grouped": section_grouped}
    for s in args.only.split(","):
        sections[s](lib, gen)
        sys.stdout.flush()
    print("== cold builds: each configuration's first tj_gemm_kernel (its "
          "compile into a fresh cache, the driver's cache off), ms")
    for name, ms in sorted(lib.builds.items(), key=lambda x: -x[1]):
        print("%8.0f  %s" % (ms, name))


if __name__ == "__main__":
    main()
