"""Does a whole trading day of context beat ten minutes?  The experiment of
fadsl's seed article, with fadsl.attention as the model's attention.

A small causal transformer reads one-second returns and classifies, at every
second, the next second's move as down / flat / up.  The same architecture,
parameters, optimiser and number of training tokens are trained at context
lengths N in {512, 4096, 23400} (23,400 seconds = one 6.5-hour trading day),
twice: with attention as one fadsl.attention call (the seed's eight-line swap
of the explicit score path for a fused kernel), and with the explicit N x N
score path (matmul, mask, softmax, matmul), which needs O(N^2) memory.  For
each it measures wall-clock seconds per epoch and torch.cuda.max_memory_allocated(),
the out-of-sample accuracy and cross-entropy on a walk-forward split, and,
for the fadsl model, the seed's precision check: each attention layer's bf16
output against float64 attention on the same inputs (maximum error relative to
the largest reference value, and the Frobenius relative error), and the
fraction of down/flat/up labels that flip when the model's attention is
computed in float64 instead.

The data are synthetic and made here (nothing is downloaded); see
synthetic_day() for exactly what they are.

    python examples/trading/trading.py --device cuda --out results.json   # the experiment
    python examples/trading/trading.py --smoke                            # tiny, on the CPU

Every number the program prints or writes is measured in this run.
"""
import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import fadsl
except ImportError:   # run from the source tree without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    import fadsl

SECONDS_PER_DAY = 23_400


# ---- data ---------------------------------------------------------------------

def synthetic_day(rng, seconds=SECONDS_PER_DAY):
    """One day of one-second log returns r_t, t = 0 .. seconds-1:

        r_t = m_t + s(t) * sigma_t * z_t,          z_t ~ N(0, 1)
        m_t = 0.9995 * m_{t-1} + 2e-6 * e_t        (a slow drift; e_t ~ N(0, 1), m_0 = 0)
        log sigma_t = log 1e-4 + 0.999 * (log sigma_{t-1} - log 1e-4) + 0.02 * u_t
                                                   (volatility clustering; u_t ~ N(0, 1))
        s(t) = 1 + 0.8 * (2 t / seconds - 1)^2     (the intraday U-shape of activity)

    The drift m_t persists for about 2,000 seconds (1 / (1 - 0.9995)) and is
    small next to the noise (its stationary std is about 4.5e-5 against a
    1e-4 to 1.8e-4 noise std), so the next move is mostly unpredictable; what
    can be learned lives in a latent state estimable only from a long window of
    past returns.  That is the question: does more context help?"""
    e, u, z = rng.standard_normal((3, seconds))
    m = np.empty(seconds)
    ls = np.empty(seconds)
    mu = math.log(1e-4)
    m_prev, ls_prev = 0.0, mu
    for t in range(seconds):   # two AR(1) recursions
        m_prev = 0.9995 * m_prev + 2e-6 * e[t]
        ls_prev = mu + 0.999 * (ls_prev - mu) + 0.02 * u[t]
        m[t], ls[t] = m_prev, ls_prev
    tt = np.arange(seconds) / seconds
    season = 1 + 0.8 * (2 * tt - 1) ** 2
    return m + season * np.exp(ls) * z


def make_days(n_days, seconds, seed):
    rng = np.random.default_rng(seed)
    return np.stack([synthetic_day(rng, seconds) for _ in range(n_days)])


def features(returns, scale):
    """Per second: the return and its magnitude in units of the training
    returns' std, and the time of day as sin/cos."""
    seconds = returns.shape[-1]
    x = returns / scale
    tod = 2 * math.pi * np.arange(seconds) / seconds
    tod = np.broadcast_to(np.stack([np.sin(tod), np.cos(tod)], -1), returns.shape + (2,))
    return np.concatenate([x[..., None], np.abs(x)[..., None], tod], -1).astype(np.float32)


def labels(returns, lo, hi):
    """The class of the next second's return: 0 down (< lo), 1 flat, 2 up (> hi);
    the last second of a day has no next one: -1, ignored."""
    nxt = np.full(returns.shape, np.nan)
    nxt[..., :-1] = returns[..., 1:]
    y = np.where(nxt < lo, 0, np.where(nxt > hi, 2, 1))
    y[..., -1] = -1
    return y.astype(np.int64)


def windows(x, y, n):
    """Cuts days into non-overlapping windows of n seconds (the remainder of
    a day is dropped); returns [windows, n, features] and [windows, n]."""
    per_day = x.shape[1] // n
    xs = x[:, : per_day * n].reshape(-1, n, x.shape[-1])
    ys = y[:, : per_day * n].reshape(-1, n)
    return xs, ys


# ---- the model --------------------------------------------------------------------

def explicit_attention(q, k, v):
    """The explicit score path: materialises the N x N scores (O(N^2) memory)."""
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    n = q.shape[-2]
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def reference_attention(q, k, v, chunk=1024):
    """Causal attention in float64 on the same inputs, query block by query
    block (so that 23,400 steps fit): the yardstick of the precision check."""
    g = q.shape[1] // k.shape[1]
    q64, k64, v64 = q.double(), k.repeat_interleave(g, 1).double(), v.repeat_interleave(g, 1).double()
    n, scale = q.shape[-2], 1 / math.sqrt(q.shape[-1])
    out = torch.empty_like(q64)
    for i in range(0, n, chunk):
        s = torch.matmul(q64[:, :, i:i + chunk], k64[:, :, : i + chunk].transpose(-2, -1)) * scale
        rows = torch.arange(i, min(i + chunk, n), device=q.device)[:, None]
        s = s.masked_fill(torch.arange(s.shape[-1], device=q.device)[None, :] > rows, float("-inf"))
        out[:, :, i:i + chunk] = torch.matmul(torch.softmax(s, -1), v64[:, :, : i + chunk])
    return out


class Attention(nn.Module):
    def __init__(self, d_model, heads, kv_heads, path):
        super().__init__()
        self.h, self.kvh, self.dh, self.path = heads, kv_heads, d_model // heads, path
        self.qkv = nn.Linear(d_model, (heads + 2 * kv_heads) * self.dh, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.capture = None          # set to a list to record (q, k, v, o) of each call

    def forward(self, x):
        B, N, _ = x.shape
        q, k, v = self.qkv(x).split([self.h * self.dh, self.kvh * self.dh, self.kvh * self.dh], -1)
        q = q.view(B, N, self.h, self.dh).transpose(1, 2)
        k = k.view(B, N, self.kvh, self.dh).transpose(1, 2)
        v = v.view(B, N, self.kvh, self.dh).transpose(1, 2)
        if self.path == "fadsl":
            o = fadsl.attention(q, k, v, causal=True)               # the one-line swap
        elif self.path == "sdpa":
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kvh != self.h)
        elif self.path == "float64":
            o = reference_attention(q, k, v).to(q.dtype)
        else:
            o = explicit_attention(q, k, v)
        if self.capture is not None:
            self.capture.append((q.detach(), k.detach(), v.detach(), o.detach()))
        return self.out(o.transpose(1, 2).reshape(B, N, -1))


class Block(nn.Module):
    def __init__(self, d_model, heads, kv_heads, path):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = Attention(d_model, heads, kv_heads, path)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class Classifier(nn.Module):
    """Input projection, causal pre-norm blocks, a 3-class head at every step."""

    def __init__(self, n_features, d_model, heads, kv_heads, layers, path):
        super().__init__()
        self.inp = nn.Linear(n_features, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, kv_heads, path) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 3)

    def set_path(self, path):
        for b in self.blocks:
            b.attn.path = path

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return self.head(self.norm(h))


# ---- training and evaluation ------------------------------------------------------------

def autocast(device):
    """bf16 autocast (on the CPU too, where the attention runs on fadsl's
    interpreter): the projections hand attention bf16 q, k, v."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def train_epoch(model, opt, xs, ys, batch, device, rng):
    model.train()
    order = rng.permutation(len(xs))
    losses = []
    for i in range(0, len(order), batch):
        idx = order[i:i + batch]
        x = torch.from_numpy(xs[idx]).to(device)
        y = torch.from_numpy(ys[idx]).to(device)
        with autocast(device):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, 3), y.reshape(-1), ignore_index=-1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return float(np.mean(losses))


@torch.no_grad()
def predict(model, xs, batch, device):
    model.eval()
    out = []
    for i in range(0, len(xs), batch):
        with autocast(device):
            out.append(model(torch.from_numpy(xs[i:i + batch]).to(device)).float().cpu())
    return torch.cat(out)


def metrics(logits, ys):
    y = torch.from_numpy(ys).reshape(-1)
    lg = logits.reshape(-1, 3)
    keep = y >= 0
    lg, y = lg[keep], y[keep]
    return {"accuracy": (lg.argmax(-1) == y).float().mean().item(),
            "cross_entropy": F.cross_entropy(lg, y).item(),
            "majority_class_accuracy": torch.bincount(y, minlength=3).max().item() / len(y)}


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def precision_check(model, xs, ys, batch, device):
    """The seed's check on the trained fadsl model: each attention layer's
    bf16 output against float64 attention on the same inputs, and the labels
    that flip when the attention of every layer is computed in float64."""
    model.eval()
    x = torch.from_numpy(xs[:batch]).to(device)
    for b in model.blocks:
        b.attn.capture = []
    with autocast(device):
        labels_fadsl = model(x).float().argmax(-1)
    layers = []
    for i, b in enumerate(model.blocks):
        q, k, v, o = b.attn.capture[0]
        ref = reference_attention(q, k, v)
        diff = (o.double() - ref).abs()
        layers.append({"layer": i, "max_abs_error_over_max_abs_ref": (diff.max() / ref.abs().max()).item(),
                       "frobenius_relative_error": (diff.norm() / ref.norm()).item(), "dtype": str(o.dtype)})
        b.attn.capture = None
    model.set_path("float64")
    with autocast(device):
        labels_64 = model(x).float().argmax(-1)
    model.set_path("fadsl")
    keep = torch.from_numpy(ys[:batch] >= 0).to(labels_64.device)   # the last second of a day has no label
    flips = (labels_fadsl != labels_64)[keep]
    return {"layers": layers, "label_flip_fraction": flips.float().mean().item(), "labels_compared": flips.numel()}


def run_length(cfg, n, path, days, device):
    """Walk-forward training and evaluation of one (N, attention path)."""
    rec = {"N": n, "attention": path, "folds": []}
    tokens = cfg.tokens_per_step
    batch = max(1, tokens // n)
    for fold, (train_days, test_days) in enumerate(cfg.folds):
        torch.manual_seed(cfg.seed)
        rng = np.random.default_rng(cfg.seed + fold)
        tr, te = days[:train_days], days[train_days:train_days + test_days]
        scale = tr.std()
        lo, hi = np.quantile(tr[:, 1:], [1 / 3, 2 / 3])
        xs, ys = windows(features(tr, scale), labels(tr, lo, hi), n)
        xt, yt = windows(features(te, scale), labels(te, lo, hi), n)
        model = Classifier(4, cfg.d_model, cfg.heads, cfg.kv_heads, cfg.layers, path).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
        f = {"fold": fold, "train_days": train_days, "test_days": test_days, "batch": batch,
             "train_windows": len(xs), "test_windows": len(xt), "epochs": []}
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        try:
            for epoch in range(cfg.epochs):
                sync(device)
                t0 = time.perf_counter()
                loss = train_epoch(model, opt, xs, ys, batch, device, rng)
                sync(device)
                f["epochs"].append({"epoch": epoch, "seconds": time.perf_counter() - t0, "train_loss": loss})
            f["max_memory_allocated_bytes"] = (torch.cuda.max_memory_allocated(device)
                                               if device.type == "cuda" else None)
            f["out_of_sample"] = metrics(predict(model, xt, batch, device), yt)
            if path == "fadsl" and fold == len(cfg.folds) - 1:
                rec["precision_check"] = precision_check(model, xt, yt, min(batch, len(xt)), device)
        except torch.cuda.OutOfMemoryError as e:
            f["failed"] = "out of memory: " + str(e).split("\n")[0]
            f["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
        rec["folds"].append(f)
        print(json.dumps({"N": n, "attention": path, **{k: v for k, v in f.items() if k != "epochs"},
                          "seconds_per_epoch": [round(e["seconds"], 3) for e in f["epochs"]]}), flush=True)
        del model, opt
        if device.type == "cuda":
            torch.cuda.empty_cache()
        if "failed" in f:
            break
    return rec


def table(results):
    lines = ["| N | attention | s / epoch (median) | max memory allocated | out-of-sample accuracy (folds) | "
             "cross-entropy (folds) | majority class |", "|---|---|---|---|---|---|---|"]
    for r in results:
        secs = [e["seconds"] for f in r["folds"] for e in f["epochs"]]
        mem = [f.get("max_memory_allocated_bytes") for f in r["folds"] if f.get("max_memory_allocated_bytes")]
        oos = [f["out_of_sample"] for f in r["folds"] if "out_of_sample" in f]
        fail = [f["failed"] for f in r["folds"] if "failed" in f]
        lines.append("| {} | {} | {} | {} | {} | {} | {} |".format(
            r["N"], r["attention"], f"{np.median(secs):.2f}" if secs else "-",
            f"{max(mem) / 2**30:.2f} GiB" if mem else "-",
            ", ".join(f"{m['accuracy']:.4f}" for m in oos) or ("failed: " + fail[0] if fail else "-"),
            ", ".join(f"{m['cross_entropy']:.4f}" for m in oos) or "-",
            ", ".join(f"{m['majority_class_accuracy']:.4f}" for m in oos) or "-"))
    checks = [(r["N"], r["precision_check"]) for r in results if "precision_check" in r]
    if checks:
        lines += ["", "| N | layer | max abs error / max abs ref | Frobenius relative error | label flips |",
                  "|---|---|---|---|---|"]
        for n, c in checks:
            for l in c["layers"]:
                lines.append(f"| {n} | {l['layer']} | {l['max_abs_error_over_max_abs_ref']:.3e} | "
                             f"{l['frobenius_relative_error']:.3e} | {c['label_flip_fraction']:.5f} of "
                             f"{c['labels_compared']} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--lengths", default="512,4096,23400")
    ap.add_argument("--attention", default="fadsl,explicit", help="comma-separated: fadsl, explicit, sdpa")
    ap.add_argument("--days", type=int, default=60, help="synthetic trading days")
    ap.add_argument("--seconds", type=int, default=SECONDS_PER_DAY, help="seconds per day")
    ap.add_argument("--folds", default="40:10,50:10",
                    help="walk-forward folds TRAIN_DAYS:TEST_DAYS, ...: train on the first TRAIN_DAYS days, "
                         "test on the TEST_DAYS after them")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--tokens-per-step", type=int, default=4 * SECONDS_PER_DAY)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write the results as JSON here (and a Markdown table beside it)")
    ap.add_argument("--smoke", action="store_true",
                    help="a tiny configuration that runs in about a minute on the CPU (the interpreter)")
    cfg = ap.parse_args(argv)
    if cfg.smoke:
        cfg.device, cfg.lengths, cfg.days, cfg.seconds, cfg.folds = "cpu", "32,96", 3, 192, "2:1"
        cfg.epochs, cfg.tokens_per_step, cfg.d_model, cfg.heads, cfg.kv_heads = 1, 384, 32, 2, 1
    cfg.folds = [tuple(int(v) for v in f.split(":")) for f in cfg.folds.split(",")]
    device = torch.device(cfg.device)
    lengths = [int(n) for n in cfg.lengths.split(",")]
    t0 = time.perf_counter()
    days = make_days(cfg.days, cfg.seconds, cfg.seed)
    print(f"data: {cfg.days} synthetic days of {cfg.seconds} one-second returns "
          f"({time.perf_counter() - t0:.1f} s to generate)", flush=True)
    results = []
    for n in lengths:
        for path in cfg.attention.split(","):
            results.append(run_length(cfg, n, path, days, device))
    env = {"torch": torch.__version__, "fadsl": fadsl.__version__, "python": platform.python_version(),
           "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"}
    doc = {"config": {k: v for k, v in vars(cfg).items()}, "environment": env, "results": results}
    print(table(results))
    if cfg.out:
        Path(cfg.out).write_text(json.dumps(doc, indent=1))
        Path(cfg.out).with_suffix(".md").write_text(table(results) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
