#!/usr/bin/env python3
"""bench/gpu/bench_gpu.py: issue 21's GPU benchmarks, side by side in one run on one GPU.

kiln's CUDA packages (default GPU schedule, and the same without shared-memory tiles, --no-shared-tiles, and
without cross-thread reductions, --no-cross-thread-reductions; --only prefetch: with and without
--chunk-prefetch; --only tuned: kiln tune's records against the default schedule;
`kiln run PKG --repeat N`, GPU time from CUDA events) against
cuBLAS SGEMM (torch.mm, TF32 off) and the GPU's measured fp32 FMA peak, and ResNet-50 / BERT-base from
`kiln zoo` against PyTorch eager (cuDNN, torchvision's / transformers' same architectures with random
weights; timing does not depend on weights) and ONNX Runtime when its CUDA provider exists. Every kiln
output is also checked against ONNX Runtime on the CPU for the same inputs (max abs / rel error).
"""
import argparse, os, re, subprocess, sys, tempfile, time

import numpy as np

def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout

def kiln_time(kiln, target, model, work, repeat, shapes=(), extra=()):
    pkg = os.path.join(work, "pkg")
    args = [kiln, "compile", model, "--target", target, "-o", pkg, *extra]
    for s in shapes: args += ["--input-shape", s]
    t0 = time.time(); sh(args); compile_s = time.time() - t0
    outdir, indir = os.path.join(work, "out"), os.path.join(work, "in")
    log = sh([kiln, "run", pkg, "--repeat", str(repeat), "--print", "0", "--output-dir", outdir, "--save-inputs", indir])
    m = re.search(r"median: ([0-9.]+) ms over \d+ run\(s\), min ([0-9.]+) ms", log)
    return float(m.group(1)), float(m.group(2)), compile_s, indir, outdir

def read_pb_dir(d):
    import onnx
    from onnx import numpy_helper
    files = sorted(f for f in os.listdir(d) if f.endswith(".pb"))
    out = []
    for f in files:
        t = onnx.TensorProto(); t.ParseFromString(open(os.path.join(d, f), "rb").read())
        out.append(numpy_helper.to_array(t))
    return out

def check_vs_ort(model, indir, outdir):
    import onnxruntime as ort
    s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    feeds = {i.name: a for i, a in zip(s.get_inputs(), read_pb_dir(indir))}
    ref = s.run(None, feeds)
    got = read_pb_dir(outdir)
    worst = 0.0
    for r, g in zip(ref, got):
        r = r.astype(np.float64); g = g.astype(np.float64)
        worst = max(worst, float(np.max(np.abs(r - g)) / (np.max(np.abs(r)) + 1e-12)))
    return worst

def cuda_time(fn, repeat=20, warmup=3):
    import torch
    for _ in range(warmup): fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2], times[0]

def fma_peak_tflops():
    """fp32 FMA peak measured now: a kernel of independent FMA chains on every SM (cupy RawKernel)."""
    import cupy as cp
    src = r'''extern "C" __global__ void fma_loop(float* out, int iters) {
      float a0 = threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, a4 = a0 + 4, a5 = a0 + 5, a6 = a0 + 6, a7 = a0 + 7;
      const float m = 0.9999f, c = 0.0001f;
      for (int i = 0; i < iters; ++i) {
        a0 = fmaf(a0, m, c); a1 = fmaf(a1, m, c); a2 = fmaf(a2, m, c); a3 = fmaf(a3, m, c);
        a4 = fmaf(a4, m, c); a5 = fmaf(a5, m, c); a6 = fmaf(a6, m, c); a7 = fmaf(a7, m, c); }
      out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7; }'''
    k = cp.RawKernel(src, "fma_loop")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    blocks, threads, iters = sms * 8, 256, 1 << 14
    out = cp.zeros(blocks * threads, dtype=cp.float32)
    k((blocks,), (threads,), (out, np.int32(iters)))
    cp.cuda.Device().synchronize()
    best = 1e9
    for _ in range(5):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record(); k((blocks,), (threads,), (out, np.int32(iters))); e.record(); e.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(s, e))
    return blocks * threads * iters * 8 * 2 / (best * 1e-3) / 1e12

# (batch, in channels, out channels, input size, kernel, stride): ResNet-50's convolution shapes.
RESNET50_CONVS = [
    (1, 3, 64, 224, 7, 2), (1, 64, 64, 56, 3, 1), (1, 64, 256, 56, 1, 1), (1, 256, 64, 56, 1, 1),
    (1, 128, 128, 28, 3, 1), (1, 512, 128, 28, 1, 1), (1, 256, 256, 14, 3, 1), (1, 1024, 256, 14, 1, 1),
    (1, 512, 512, 7, 3, 1), (1, 2048, 512, 7, 1, 1), (1, 512, 2048, 7, 1, 1),
    (16, 64, 64, 56, 3, 1), (16, 256, 256, 14, 3, 1), (16, 512, 512, 7, 3, 1),
]

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True); ap.add_argument("--target", default="cuda-sm90")
    ap.add_argument("--out", required=True); ap.add_argument("--only", default="")
    ap.add_argument("--records-dir", default="", help="tuned: <name>.records.json per model (kiln tune over RPC)")
    a = ap.parse_args()
    import torch
    # fp32 against fp32: PyTorch's default lets cuDNN convolutions use TF32 tensor cores (a 10-bit
    # mantissa), which the runs of 2026-11-26 still had for the model rows.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    lines = [f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; TF32 off"]
    def log(s):
        print(s, flush=True); lines.append(s)
        open(a.out, "w").write("\n".join(lines) + "\n")
    try:
        log(f"fp32 FMA peak (measured): {fma_peak_tflops():.1f} TFLOP/s")
    except Exception as e:
        log(f"fp32 FMA peak: not measured ({e})")
    work = tempfile.mkdtemp()
    only = set(a.only.split(",")) if a.only else None

    if not only or "matmul" in only:
        n = 4096
        model = os.path.join(work, "matmul.onnx")
        sh([a.kiln, "zoo", "matmul", "--m", str(n), "--n", str(n), "--k", str(n), "-o", model])
        med, mn, cs, indir, outdir = kiln_time(a.kiln, a.target, model, os.path.join(work, "mm"), 5)
        err = check_vs_ort(model, indir, outdir)
        _, nmn, _, nin, nout = kiln_time(a.kiln, a.target, model, os.path.join(work, "mm-ns"), 5, extra=["--no-shared-tiles"])
        nerr = check_vs_ort(model, nin, nout)
        x = torch.randn(n, n, device="cuda"); y = torch.randn(n, n, device="cuda")
        tmed, tmn = cuda_time(lambda: torch.mm(x, y))
        fl = 2 * n ** 3
        log(f"matmul {n}^3 fp32: kiln median {med:.3f} ms (min {mn:.3f}) = {fl / mn / 1e9:.1f} TFLOP/s; "
            f"cuBLAS (torch.mm, TF32 off) median {tmed:.3f} ms (min {tmn:.3f}) = {fl / tmn / 1e9:.1f} TFLOP/s; "
            f"kiln/cuBLAS time {mn / tmn:.2f}x; compile {cs:.1f} s; max rel err vs ORT CPU {err:.2e}; "
            f"without shared tiles min {nmn:.3f} ms = {fl / nmn / 1e9:.1f} TFLOP/s (err {nerr:.2e})")

    for net, batches in (("resnet50", (1, 16)), ("bert_base", (1,))):
        if only and net not in only: continue
        for b in batches:
            model = os.path.join(work, f"{net}_b{b}.onnx")
            try:
                sh([a.kiln, "zoo", net, "--batch", str(b), "-o", model])
                med, mn, cs, indir, outdir = kiln_time(a.kiln, a.target, model, os.path.join(work, f"{net}{b}"), 10)
                err = check_vs_ort(model, indir, outdir)
                _, nmn, _, nin, nout = kiln_time(a.kiln, a.target, model, os.path.join(work, f"{net}{b}-ns"), 10,
                                                 extra=["--no-shared-tiles"])
                nerr = check_vs_ort(model, nin, nout)
                _, xmn, _, xin, xout = kiln_time(a.kiln, a.target, model, os.path.join(work, f"{net}{b}-nx"), 10,
                                                 extra=["--no-cross-thread-reductions"])
                xerr = check_vs_ort(model, xin, xout)
            except subprocess.CalledProcessError as e:
                log(f"{net} batch {b}: kiln failed: {(e.stderr or '')[-400:]}"); continue
            ref = ""
            try:
                if net == "resnet50":
                    import torchvision
                    m = torchvision.models.resnet50().cuda().eval()
                    inp = torch.randn(b, 3, 224, 224, device="cuda")
                else:
                    import transformers
                    m = transformers.BertModel(transformers.BertConfig()).cuda().eval()
                    inp = torch.randint(0, 30000, (b, 128), device="cuda")
                with torch.no_grad():
                    pmed, pmn = cuda_time(lambda: m(inp))
                ref = f"PyTorch eager median {pmed:.3f} ms (min {pmn:.3f}); kiln/PyTorch time {mn / pmn:.2f}x"
            except Exception as e:
                ref = f"PyTorch eager: not measured ({type(e).__name__}: {e})"
            log(f"{net} batch {b}: kiln median {med:.3f} ms (min {mn:.3f}), compile {cs:.1f} s, max rel err vs ORT CPU {err:.2e}; "
                f"without shared tiles min {nmn:.3f} ms (err {nerr:.2e}); without cross-thread reductions min {xmn:.3f} ms "
                f"(err {xerr:.2e}); {ref}")
    if not only or "layers" in only:
        # ResNet-50's convolutions one at a time: kiln with and without shared-memory tiles, and cuDNN
        # (torch conv2d, TF32 off, no autotuning), each the fastest of its runs.
        import torch.nn.functional as F
        torch.backends.cudnn.benchmark = False
        for batch, cin, cout, size, kernel, stride in RESNET50_CONVS:
            pad = kernel // 2
            name = f"conv{kernel}x{kernel} {cin}->{cout} @{size} s{stride} b{batch}"
            model = os.path.join(work, f"layer_{batch}_{cin}_{cout}_{size}_{kernel}_{stride}.onnx")
            sh([a.kiln, "zoo", "conv2d", "--batch", str(batch), "--in-channels", str(cin), "--out-channels", str(cout),
                "--size", str(size), "--kernel", str(kernel), "--stride", str(stride), "--padding", str(pad), "-o", model])
            w = os.path.join(work, f"layer_{batch}_{cin}_{cout}_{size}_{kernel}_{stride}")
            _, mn, _, indir, outdir = kiln_time(a.kiln, a.target, model, w, 20)
            err = check_vs_ort(model, indir, outdir)
            _, nmn, _, _, _ = kiln_time(a.kiln, a.target, model, w + "-ns", 20, extra=["--no-shared-tiles"])
            x = torch.randn(batch, cin, size, size, device="cuda")
            wt = torch.randn(cout, cin, kernel, kernel, device="cuda")
            _, cmn = cuda_time(lambda: F.conv2d(x, wt, stride=stride, padding=pad))
            fl = 2 * batch * cout * ((size + 2 * pad - kernel) // stride + 1) ** 2 * cin * kernel * kernel
            log(f"layer {name}: kiln {mn:.4f} ms ({fl / mn / 1e9:.1f} TFLOP/s), without shared tiles {nmn:.4f} ms, "
                f"cuDNN {cmn:.4f} ms; kiln/cuDNN {mn / cmn:.2f}x; shared/without {mn / nmn:.2f}x; err {err:.1e}")
    if only and "prefetch" in only:
        # Chunk prefetch (kiln compile --chunk-prefetch: each shared tile loads its next chunk into
        # registers during the current chunk's FMAs) against the default rule's tiles without it: the
        # 4096^3 matmul, ResNet-50's convolutions one at a time, and the models, side by side.
        cases = [("matmul 4096^3", ["zoo", "matmul", "--m", "4096", "--n", "4096", "--k", "4096"])]
        for batch, cin, cout, size, kernel, stride in RESNET50_CONVS:
            cases.append((f"conv{kernel}x{kernel} {cin}->{cout} @{size} s{stride} b{batch}",
                          ["zoo", "conv2d", "--batch", str(batch), "--in-channels", str(cin), "--out-channels", str(cout),
                           "--size", str(size), "--kernel", str(kernel), "--stride", str(stride), "--padding", str(kernel // 2)]))
        cases += [("resnet50 b1", ["zoo", "resnet50", "--batch", "1"]), ("resnet50 b16", ["zoo", "resnet50", "--batch", "16"]),
                  ("bert_base b1", ["zoo", "bert_base", "--batch", "1"])]
        for i, (name, zoo) in enumerate(cases):
            model = os.path.join(work, f"prefetch_{i}.onnx")
            sh([a.kiln] + zoo + ["-o", model])
            w = os.path.join(work, f"prefetch_{i}")
            _, mn, _, _, _ = kiln_time(a.kiln, a.target, model, w + "-d", 10)
            _, pmn, _, pin, pout = kiln_time(a.kiln, a.target, model, w + "-p", 10, extra=["--chunk-prefetch"])
            err = check_vs_ort(model, pin, pout)
            log(f"prefetch {name}: default min {mn:.4f} ms, with chunk prefetch min {pmn:.4f} ms "
                f"(prefetch/default {pmn / mn:.2f}x; err {err:.1e})")
    if only and "tuned" in only:
        # Tuned against untuned kiln (kiln tune's records, <name>[@batch][.cost_model].records.json as
        # device_run.sh's tune phase writes them), side by side with cuBLAS / PyTorch eager.
        for rec in sorted(f for f in os.listdir(a.records_dir) if f.endswith(".records.json")):
            spec = rec[: -len(".records.json")]  # NAME[@BATCH][.COST_MODEL]
            name, _, batch = spec.partition(".")[0].partition("@")
            b = int(batch or 1)
            model = os.path.join(work, f"tuned_{spec}.onnx")
            if name == "matmul":
                sh([a.kiln, "zoo", "matmul", "--m", "4096", "--n", "4096", "--k", "4096", "-o", model])
            else:
                sh([a.kiln, "zoo", name, "--batch", str(b), "-o", model])
            rec = os.path.join(a.records_dir, rec)
            _, dmn, _, din, dout = kiln_time(a.kiln, a.target, model, os.path.join(work, f"{spec}-d"), 20)
            _, tmn, _, tin, tout = kiln_time(a.kiln, a.target, model, os.path.join(work, f"{spec}-t"), 20, extra=["--records", rec])
            derr, terr = check_vs_ort(model, din, dout), check_vs_ort(model, tin, tout)
            if name == "matmul":
                x = torch.randn(4096, 4096, device="cuda"); y = torch.randn(4096, 4096, device="cuda")
                _, rmn = cuda_time(lambda: torch.mm(x, y)); ref = "cuBLAS"
            else:
                if name == "resnet50":
                    import torchvision
                    m = torchvision.models.resnet50().cuda().eval(); inp = torch.randn(b, 3, 224, 224, device="cuda")
                else:
                    import transformers
                    m = transformers.BertModel(transformers.BertConfig()).cuda().eval()
                    inp = torch.randint(0, 30000, (b, 128), device="cuda")
                with torch.no_grad(): _, rmn = cuda_time(lambda: m(inp))
                ref = "PyTorch eager"
            log(f"tuned {spec}: kiln default min {dmn:.3f} ms (err {derr:.1e}), tuned min {tmn:.3f} ms (err {terr:.1e}), "
                f"tuned/default {tmn / dmn:.2f}x; {ref} min {rmn:.3f} ms; tuned kiln/{ref} {tmn / rmn:.2f}x")
        return
    import onnxruntime as ort
    log(f"ONNX Runtime providers here: {ort.get_available_providers()}")

if __name__ == "__main__":
    main()
