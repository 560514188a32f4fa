"""quickdraft vs llama.cpp, one run, same GGUF files, same thread count.

    python bench/compare.py                       # everything (about 15 minutes on 2 cores)
    python bench/compare.py --only decode --models smollm2-135m --threads 2
    python bench/compare.py --isa avx2            # ours with QD_FORCE_ISA=avx2 against an AVX2-only llama.cpp
    python bench/compare.py --isa avx2_vnni       # the same with AVX-VNNI on both sides (no AVX-512)
    python bench/compare.py --isa avx2 --only spec --reps 3   # generation only, 3 rounds in turn, medians
    python bench/compare.py --isa avx2 --only decode --decode-turns 8   # plus decode ratios in turns

Measures, for ours and llama.cpp side by side:
  decode tok/s (tg, 128 tokens) and pp512 tok/s for each model;
  the verify cost curve: time of one forward over n = 1..16 tokens after a 64-token context
    (Qwen2.5-Coder-1.5B), as a multiple of n = 1; and its decode tok/s after 1000 and 3000 tokens;
  greedy speculative tok/s with the Qwen2.5-Coder 0.5B -> 1.5B pair on code / chat / repetitive
    prompts (ours: Engine with each drafter; llama.cpp: llama-speculative and plain llama-completion);
  peak RSS of each measuring process (os.wait4);
  with --decode-turns N, each model's decode again in N rounds of ours and llama.cpp back to back
    (64 tokens each, the order alternating), each round's ratio labelled with the read bandwidth
    probed before it: the tg column's two runs lie minutes apart and may meet different phases of
    this VM's memory (33 against 60 GB/s), which moves a memory-bound decode's ratio by half.
Every output records the CPU model, the ISA each side ran and the machine's measured read
bandwidth (and the Qwen 1.5B's decode ceiling it implies; `_core.measure_read_bandwidth`), the
1.5B's decode as a share of the bandwidth measured just before and after it, and the speculative
section the bandwidth before each of its rounds with each drafter's ratio to our own plain decoding:
taken in turns with every engine loaded in one process (bench/speculative.py's run, the same
prompts), where a turn's runs share the memory's phase, and, for reference, between the fresh
processes of the table's cells, which may not. Prints tables with ratios (ours / llama.cpp), writes
bench/out/compare.json and, when matplotlib is installed, bench/out/compare.png. The llama.cpp build
comes from bench/peer.py (cached).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# The working tree's package when it has a built _core (./dev-build.sh), before any installed one:
# a stale `pip install` would otherwise be what gets measured (the workers inherit this path).
if any((HERE.parent / "python" / "quickdraft").glob("_core*.so")):
    sys.path.insert(0, str(HERE.parent / "python"))
import peer  # noqa: E402
from machine import cpu_model, read_bandwidth  # noqa: E402

from quickdraft import models  # noqa: E402

PROMPTS = {
    "code": "Write a Python function that checks whether a number is prime, then a function that lists the primes below n.",
    "chat": "Tell me about the history of the city of Lyon in a few paragraphs.",
    "repetitive": "Repeat the following list exactly three times: apple, banana, cherry, date, elderberry, fig, grape.",
}
VERIFY_NS = [1, 2, 3, 4, 6, 8, 12, 16]
DEPTHS = [1000, 3000]  # decode after this many tokens of context (the verify model): attention's share
VERIFY_DEPTH = 3000  # and one forward of 8 tokens (a verify batch) after this many
DECODE_TURN_TOKENS = 64  # tokens per side and round of --decode-turns


# ---------------------------------------------------------------- running a measurement process

def run_measured(cmd: list[str], timeout: float = 1800) -> tuple[str, str, float]:
    """Run cmd, return (stdout, stderr, peak RSS in MB) of that process alone."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        t0 = time.time()
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.time() - t0 > timeout:
                p.kill()
                raise TimeoutError(" ".join(cmd))
            time.sleep(0.05)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        so, se = out.read(), err.read()
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({p.returncode}):\n{se[-3000:]}")
    return so, se, ru.ru_maxrss / 1024


# ---------------------------------------------------------------- ours (worker subprocess)

def worker(spec: dict) -> dict:
    import numpy as np

    import quickdraft

    kind = spec["kind"]
    if kind == "model":
        m = quickdraft.Model(models.resolve(spec["model"]), n_ctx=1024, threads=spec["threads"])
        rng = np.random.default_rng(0)
        ids = [int(x) for x in rng.integers(100, min(m.n_vocab, 30000), 700)]
        m.eval_last(ids[:8])  # warm-up: page weights in, start the pool
        res = {}
        best = 0.0
        for _ in range(2):
            m.reset()
            t = time.perf_counter()
            m.eval_last(ids[:512])
            best = max(best, 512 / (time.perf_counter() - t))
        res["pp512"] = best
        m.reset()
        m.eval_last(ids[:16])
        # The 1.5B decodes in 4 stretches of 32 tokens with the memory's read rate measured before
        # each and after the last: this VM's memory changes speed within minutes, so each stretch
        # is judged against the probes on either side of it. (A probe's own process, of 0.5 GB,
        # stays below this one's peak RSS.)
        stretches = 4 if spec.get("verify") else 1
        probes, stretch_tok_s, elapsed = [], [], 0.0
        for k in range(stretches):
            if spec.get("verify"):
                probes.append(read_bandwidth(spec["threads"]))
            t = time.perf_counter()
            for i in range(16 + 128 * k // stretches, 16 + 128 * (k + 1) // stretches):
                m.eval_last(ids[i:i + 1])
            dt = time.perf_counter() - t
            elapsed += dt
            stretch_tok_s.append(128 / stretches / dt)
        res["tg128"] = 128 / elapsed
        if spec.get("verify"):
            probes.append(read_bandwidth(spec["threads"]))
            res["decode_bytes"] = decode_bytes(m)
            res["decode_stretches"] = [{"tok_s": v, "read_GBps": probes[k:k + 2]} for k, v in enumerate(stretch_tok_s)]
        if spec.get("verify"):
            # a second context over the same weights (a second Model would map the file twice and
            # count its pages twice in the peak RSS)
            deep = m.new_context(n_ctx=max(DEPTHS) + 64, threads=spec["threads"])
            long_ids = [int(x) for x in rng.integers(100, min(m.n_vocab, 30000), max(DEPTHS) + 32)]
            res["tg32_at"] = {}
            for d in DEPTHS:
                deep.reset()
                deep.eval_last(long_ids[:d])
                t = time.perf_counter()
                for i in range(d, d + 32):
                    deep.eval_last(long_ids[i:i + 1])
                res["tg32_at"][d] = 32 / (time.perf_counter() - t)
                if d == VERIFY_DEPTH:
                    ts = []
                    for _ in range(5):
                        deep.truncate(d)
                        t = time.perf_counter()
                        deep.eval(long_ids[d:d + 8])
                        ts.append(time.perf_counter() - t)
                    res["verify8_at_ms"] = 1000 * sorted(ts)[2]
            del deep

            # Round-robin over n, median of 5: the machine's speed drifts within minutes, and the
            # curve is read as ratios to n = 1, so every n is sampled across the same period.
            # The probe before and after says which phase of the memory the curve was read in: n = 1
            # is bound by memory, n >= 3 by the cores, so the ratios move with it.
            times = {n: [] for n in VERIFY_NS}
            res["read_GBps_around_verify"] = [read_bandwidth(spec["threads"])]
            for rep in range(5):
                for n in VERIFY_NS:
                    m.reset()
                    m.eval_last(ids[:64])
                    t = time.perf_counter()
                    m.eval(ids[64:64 + n])
                    times[n].append(time.perf_counter() - t)
            res["verify_ms"] = {n: 1000 * sorted(ts)[len(ts) // 2] for n, ts in times.items()}
            res["read_GBps_around_verify"].append(read_bandwidth(spec["threads"]))
        return res
    if kind == "decode":
        m = quickdraft.Model(models.resolve(spec["model"]), n_ctx=256, threads=spec["threads"])
        ids = [int(x) for x in np.random.default_rng(0).integers(100, min(m.n_vocab, 30000), 16 + DECODE_TURN_TOKENS)]
        m.eval_last(ids[:16])  # page the weights in, start the pool, fill a short context
        t = time.perf_counter()
        for i in range(16, 16 + DECODE_TURN_TOKENS):
            m.eval_last(ids[i:i + 1])
        return {"tok_s": DECODE_TURN_TOKENS / (time.perf_counter() - t)}
    if kind == "spec":
        draft = None if spec["draft"] == "none" else spec["draft"]
        if draft and draft.startswith("hybrid:"):
            draft = ("hybrid", str(models.resolve(draft.split(":", 1)[1])))
        elif draft not in (None, "ngram", "self"):
            draft = str(models.resolve(draft))
        e = quickdraft.Engine(str(models.resolve(spec["target"])), draft=draft, n_ctx=2048, threads=spec["threads"],
                              draft_head=spec.get("draft_head"))
        prompt = e.tokenizer.apply_chat_template([{"role": "user", "content": spec["prompt"]}], add_generation_prompt=True)
        e.generate(prompt, max_tokens=8, temperature=0)  # warm-up
        c = e.generate(prompt, max_tokens=spec["n"], temperature=0)
        s = c.stats
        return {"tok_s": s.tokens_per_second, "acceptance": s.acceptance_rate, "tokens": len(c.tokens),
                "mean_accepted": s.mean_accepted_length}
    if kind == "spec_turns":
        return spec_turns(spec)
    raise ValueError(kind)


def spec_turns(spec: dict) -> dict:
    """Each drafter against our plain decoding with every engine loaded in one process, taking
    turns per prompt and round (bench/speculative.py's run): {prompt: {drafter: median ratio}}.
    The fresh process of each cell meets whichever phase of this VM's memory it meets (35 or
    65 GB/s within seconds), so a ratio of two cells says more about the phases than about the
    drafter; a turn's two runs share theirs."""
    import speculative

    kinds, draft = {}, None
    for d in spec["drafters"]:
        if d in ("ngram", "self"):
            kinds[d] = d
            continue
        kind, model = ("hybrid", d.split(":", 1)[1]) if d.startswith("hybrid:") else ("model", d)
        if draft not in (None, model):
            raise ValueError(f"one draft model for the model and hybrid drafters, got {draft} and {model}")
        kinds[kind], draft = d, model
    args = speculative.parser().parse_args([
        "--target", spec["target"], "--draft", draft or spec["draft"], "--drafters", ",".join(kinds), "--prompts",
        ",".join(spec["prompts"]), "--threads", str(spec["threads"]), "--max-tokens", str(spec["n"]),
        "--reps", str(spec["reps"]), "--n-ctx", "2048"])
    rows = speculative.run(args, texts=spec["prompts"])
    return {name: {kinds[r["drafter"]]: r["vs_plain"] for r in rows if r["prompt"] == name and r["drafter"] in kinds}
            for name in spec["prompts"]}


def ours(spec: dict) -> dict:
    out, _, rss = run_measured([sys.executable, __file__, "--worker", json.dumps(spec)])
    res = json.loads(out.strip().splitlines()[-1])
    res["rss_mb"] = rss
    return res


# ---------------------------------------------------------------- the machine

def decode_bytes(m) -> int:
    """Weight bytes one decode step streams: every matrix as loaded, less the token embedding's
    (rows looked up, not streamed) unless it is also the output layer (tied)."""
    storage = m.matrix_storage
    tied = "output.weight" not in storage
    return sum(b for name, (_, b, _) in storage.items() if tied or name != "token_embd.weight")


# ---------------------------------------------------------------- llama.cpp

def llama_bench(bin_dir: Path, path: Path, threads: int, p: str, n: str, extra: list[str] = ()) -> tuple[list[dict], float]:
    out, _, rss = run_measured([str(bin_dir / "llama-bench"), "-m", str(path), "-t", str(threads), "-p", p, "-n", n,
                                "-r", "3", "-o", "json", *extra])
    return json.loads(out), rss


def llama_model(bin_dir: Path, key: str, threads: int, verify: bool) -> dict:
    path = models.resolve(key)
    rows, rss = llama_bench(bin_dir, path, threads, "512", "128")
    res = {"rss_mb": rss}
    for r in rows:
        if r["n_prompt"] == 512:
            res["pp512"] = r["avg_ts"]
        if r["n_gen"] == 128:
            res["tg128"] = r["avg_ts"]
    if verify:
        rows, _ = llama_bench(bin_dir, path, threads, ",".join(map(str, VERIFY_NS)), "0")
        res["verify_ms"] = {r["n_prompt"]: r["avg_ns"] / 1e6 for r in rows}
        rows, _ = llama_bench(bin_dir, path, threads, "0", "32", ["-d", ",".join(map(str, DEPTHS))])
        res["tg32_at"] = {r["n_depth"]: r["avg_ts"] for r in rows}
        rows, _ = llama_bench(bin_dir, path, threads, "8", "0", ["-d", str(VERIFY_DEPTH), "-r", "2"])
        res["verify8_at_ms"] = rows[0]["avg_ns"] / 1e6
    return res


def decode_turns(bin_dir: Path, key: str, threads: int, rounds: int) -> list[dict]:
    """Our decode and llama.cpp's, back to back in each of `rounds` rounds (the order alternating),
    each round labelled with the read bandwidth probed just before it."""
    run = {"ours": lambda: ours({"kind": "decode", "model": key, "threads": threads})["tok_s"],
           "llama": lambda: llama_bench(bin_dir, models.resolve(key), threads, "0", str(DECODE_TURN_TOKENS),
                                        ["-r", "1"])[0][0]["avg_ts"]}
    out = []
    for r in range(rounds):
        bw = read_bandwidth(threads)
        tok_s = {side: run[side]() for side in (("ours", "llama") if r % 2 == 0 else ("llama", "ours"))}
        out.append({"read_GBps": bw, **tok_s, "ratio": tok_s["ours"] / tok_s["llama"]})
    return out


def print_decode_turns(key: str, turns: list[dict]) -> None:
    """Each round, slowest memory first, then the median ratio of the rounds below and above the
    probes' median (the memory's two phases on this VM)."""
    print(f"  {key}: decode in turns, {DECODE_TURN_TOKENS} tokens a side, rounds by the read bandwidth probed before them")
    for t in sorted(turns, key=lambda t: t["read_GBps"]):
        print(f"    {t['read_GBps']:5.1f} GB/s  ours {t['ours']:6.1f}  llama.cpp {t['llama']:6.1f} tok/s  {t['ratio']:.2f}x")
    mid = statistics.median(t["read_GBps"] for t in turns)
    halves = [[t["ratio"] for t in turns if t["read_GBps"] <= mid], [t["ratio"] for t in turns if t["read_GBps"] > mid]]
    print(f"    median ratio {statistics.median(t['ratio'] for t in turns):.2f}x; rounds at or below {mid:.1f} GB/s "
          f"{statistics.median(halves[0]):.2f}x" + (f", above {statistics.median(halves[1]):.2f}x" if halves[1] else ""))


def chatml(text: str) -> str:
    return f"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" \
           f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def llama_spec(bin_dir: Path, target: str, draft: str | None, prompt: str, threads: int, n: int) -> dict:
    tp = str(models.resolve(target))
    if draft:
        cmd = [str(bin_dir / "llama-speculative"), "-m", tp, "-md", str(models.resolve(draft)), "--spec-draft-n-max", "8"]
    else:
        cmd = [str(bin_dir / "llama-completion"), "-m", tp, "-no-cnv", "--no-warmup"]
    cmd += ["-p", chatml(prompt), "-n", str(n), "--temp", "0", "-t", str(threads), "-c", "2048"]
    out, err, rss = run_measured(cmd)
    text = out + err
    if draft:
        m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s", text)
        acc = re.search(r"accept\s+=\s+([\d.]+)%", text)
        return {"tok_s": float(m.group(3)), "acceptance": float(acc.group(1)) / 100 if acc else None, "rss_mb": rss}
    m = re.search(r"eval time =\s+([\d.]+) ms /\s+(\d+) runs", text)
    return {"tok_s": 1000 * int(m.group(2)) / float(m.group(1)), "rss_mb": rss}


# ---------------------------------------------------------------- report

def ratio(a, b) -> str:
    return f"{a / b:5.2f}x" if a and b else "    -"


def median_run(runs: list[dict]) -> dict:
    """One speculative run's fields, each the median over the rounds (None where a run has none)."""
    out = {}
    for k in runs[0]:
        vals = [r.get(k) for r in runs]
        nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        out[k] = statistics.median(nums) if len(nums) == len(vals) else vals[0]
    return out


def best_tok_s(round_: dict) -> float:
    """The fastest of our drafters in one round (plain decoding excluded)."""
    return max(r["tok_s"] for d, r in round_["ours"].items() if d != "none")


def plot(result: dict, path: Path) -> None:
    """Decode and pp512 ratios, the verify cost curve, speculative tok/s: one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    t = result["threads"]
    fig.suptitle(f"{result.get('cpu', '?')}: ours {result.get('isa_ours', '?')}, llama.cpp {result.get('isa_llama.cpp', '?')}, "
                 f"{t} threads, read {result.get('read_GBps', 0):.0f} GB/s", fontsize=10)
    keys = list(result["models"])
    if keys:
        ax = axes[0]
        xs = range(len(keys))
        for off, metric in ((-0.2, "tg128"), (0.2, "pp512")):
            vals = [result["models"][k]["ours"][metric] / result["models"][k]["llama.cpp"].get(metric, float("nan"))
                    for k in keys]
            ax.bar([x + off for x in xs], vals, 0.4, label="decode" if metric == "tg128" else "pp512")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xticks(list(xs), keys, rotation=15)
        ax.set_ylabel(f"quickdraft / llama.cpp ({t} threads)")
        ax.set_title("forward pass speed ratio")
        ax.legend()
        for k in keys:
            if "verify_ms" in result["models"][k]["ours"]:
                ov = {int(n): v for n, v in result["models"][k]["ours"]["verify_ms"].items()}
                pv = {int(n): v for n, v in result["models"][k]["llama.cpp"]["verify_ms"].items()}
                ns = sorted(ov)
                axes[1].plot(ns, [ov[n] / ov[1] for n in ns], "o-", label="quickdraft")
                axes[1].plot(ns, [pv[n] / pv[1] for n in ns], "s--", label="llama.cpp")
                axes[1].set_xlabel("tokens in one forward")
                axes[1].set_ylabel("time / time of 1 token")
                axes[1].set_title(f"verify cost, {k}")
                axes[1].legend()
    if result["spec"]:
        ax = axes[2]
        names = list(result["spec"])
        cols = ["llama plain", "llama spec"] + [f"ours {d}" for d in result["spec"][names[0]]["ours"]]
        w = 0.8 / len(cols)
        for c, col in enumerate(cols):
            vals = []
            for nme in names:
                r = result["spec"][nme]
                v = r["llama_plain"] if col == "llama plain" else r["llama_spec"] if col == "llama spec" \
                    else r["ours"][col[5:]]
                vals.append(v["tok_s"])
            ax.bar([i - 0.4 + w * (c + 0.5) for i in range(len(names))], vals, w, label=col.split("-")[-1])
        ax.set_xticks(range(len(names)), names)
        ax.set_ylabel("tok/s, greedy")
        ax.set_title("speculative decoding, Qwen2.5-Coder 0.5B -> 1.5B")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"saved {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description="quickdraft vs llama.cpp on the same files")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--models", nargs="*", default=list(models.KNOWN_MODELS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", choices=["decode", "spec"], default=None)
    ap.add_argument("--tokens", type=int, default=128, help="tokens generated per speculative run")
    ap.add_argument("--drafters", default="qwen2.5-coder-0.5b,ngram,self")
    ap.add_argument("--reps", type=int, default=1,
                    help="speculative section: rounds of every run of a prompt in turn (llama.cpp plain and "
                         "speculative, ours per drafter); cells are medians, the ratios the median of each "
                         "round's own ratio, so that a drift of the machine's speed hits both sides alike")
    ap.add_argument("--decode-turns", type=int, default=0, metavar="N",
                    help="decode section: each model's decode again in N rounds of ours and llama.cpp back to "
                         "back, each round's ratio with the read bandwidth probed before it")
    ap.add_argument("--isa", choices=[k for k in peer.ISA_FLAGS if k], default=None,
                    help="ours with QD_FORCE_ISA=ISA against a llama.cpp built for that ISA only")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return

    bin_dir = peer.ensure(args.isa)
    t = args.threads
    if args.isa:
        os.environ["QD_FORCE_ISA"] = args.isa
    import quickdraft
    bw = read_bandwidth(t)
    result = {"threads": t, "date": time.strftime("%Y-%m-%d"), "cpu": cpu_model(), "isa_ours": quickdraft.current_isa(),
              "isa_llama.cpp": args.isa or "native", "read_GBps": bw, "models": {}, "spec": {}}
    print(f"quickdraft from {Path(quickdraft.__file__).parent}")
    print(f"CPU {result['cpu']}; ours on {result['isa_ours']}, llama.cpp built {result['isa_llama.cpp']}; "
          f"read bandwidth {bw:.1f} GB/s at {t} threads (the Qwen 1.5B streams 1.000 GB a token: its decode "
          f"ceiling {bw:.1f} tok/s)")
    if args.only in (None, "decode"):
        print(f"\n## Forward pass, {t} threads (tok/s; RSS MB)\n")
        print(f"{'model':<20} {'tg ours':>8} {'tg llama':>8} {'ratio':>6}  {'pp512 ours':>10} {'pp512 llama':>11} "
              f"{'ratio':>6}  {'RSS ours':>8} {'RSS llama':>9}")
        for key in args.models:
            verify = key == "qwen2.5-coder-1.5b"
            o = ours({"kind": "model", "model": key, "threads": t, "verify": verify})
            p = llama_model(bin_dir, key, t, verify)
            result["models"][key] = {"ours": o, "llama.cpp": p}
            print(f"{key:<20} {o['tg128']:8.1f} {p.get('tg128', 0):8.1f} {ratio(o['tg128'], p.get('tg128')):>6}  "
                  f"{o['pp512']:10.1f} {p.get('pp512', 0):11.1f} {ratio(o['pp512'], p.get('pp512')):>6}  "
                  f"{o['rss_mb']:8.0f} {p['rss_mb']:9.0f}", flush=True)
            if verify:
                shares = []
                print(f"\n  decode of {key}, {o['decode_bytes'] / 1e9:.3f} GB of weights a token, in stretches of "
                      f"32 tokens against the read bandwidth measured on either side:")
                for st in o["decode_stretches"]:
                    gbps = st["tok_s"] * o["decode_bytes"] / 1e9
                    shares.append(gbps / max(st["read_GBps"]))
                    print(f"    {st['tok_s']:5.1f} tok/s = {gbps:5.1f} GB/s, read {' / '.join(f'{b:.1f}' for b in st['read_GBps'])}"
                          f" GB/s: {100 * shares[-1]:.0f} %")
                o["decode_share_of_read"] = statistics.median(shares)
                print(f"    median {100 * o['decode_share_of_read']:.0f} % of the read bandwidth")
                print(f"\n  verify cost on {key}: ms for one forward of n tokens (multiple of n=1); read "
                      f"{' / '.join(f'{b:.1f}' for b in o['read_GBps_around_verify'])} GB/s before / after the curve")
                ov = {int(k): v for k, v in o["verify_ms"].items()}  # JSON made the keys strings
                for n in VERIFY_NS:
                    om, pm, o1 = ov[n], p["verify_ms"][n], ov[1]
                    print(f"  n={n:2d}  ours {om:7.1f} ms ({om / o1:4.2f}x)   llama.cpp {pm:7.1f} ms "
                          f"({pm / p['verify_ms'][1]:4.2f}x)")
                od = {int(k): v for k, v in o["tg32_at"].items()}
                for d in DEPTHS:
                    print(f"  decode after {d} tokens of context: ours {od[d]:5.1f} tok/s, llama.cpp "
                          f"{p['tg32_at'][d]:5.1f} tok/s ({ratio(od[d], p['tg32_at'][d]).strip()})")
                if "verify8_at_ms" in o and "verify8_at_ms" in p:
                    ov8, pv8 = o["verify8_at_ms"], p["verify8_at_ms"]
                    print(f"  verify(8) after {VERIFY_DEPTH} tokens of context: ours {ov8:6.1f} ms "
                          f"({ov8 * od[VERIFY_DEPTH] / 1000:4.2f}x its decode), llama.cpp {pv8:6.1f} ms "
                          f"({pv8 * p['tg32_at'][VERIFY_DEPTH] / 1000:4.2f}x) ({ratio(pv8, ov8).strip()} faster)")
                print()
        if args.decode_turns:
            print(f"\n## Decode in turns, {t} threads\n")
            for key in args.models:
                turns = decode_turns(bin_dir, key, t, args.decode_turns)
                result["models"][key]["decode_turns"] = turns
                print_decode_turns(key, turns)
    if args.only in (None, "spec"):
        target, draft = models.DEFAULT_TARGET, models.DEFAULT_DRAFT
        print(f"\n## Greedy generation, {target} (draft {draft}), {args.tokens} tokens, {t} threads (tok/s)\n")
        drafters = ["none"] + args.drafters.split(",")
        print(f"{'prompt':<11} {'llama plain':>11} {'llama spec':>10} " +
              " ".join(f"{('ours ' + d.split('-')[-1] if d != 'none' else 'ours plain'):>12}" for d in drafters) +
              f"  {'best/llama plain':>16} {'best/llama spec':>15}")
        # each drafter against our plain, taken in turns in one process (the target: never below 1.0x)
        turns = ours({"kind": "spec_turns", "target": target, "draft": draft, "threads": t, "n": args.tokens,
                      "drafters": drafters[1:], "prompts": PROMPTS, "reps": max(1, args.reps)})
        for name, text in PROMPTS.items():
            rounds = []
            for _ in range(max(1, args.reps)):
                # this VM's memory changes speed within minutes (33 against 62 GB/s): each round is labelled
                round_bw = read_bandwidth(t)
                lp = llama_spec(bin_dir, target, None, text, t, args.tokens)
                ls = llama_spec(bin_dir, target, draft, text, t, args.tokens)
                row = {d: ours({"kind": "spec", "target": target, "draft": d, "prompt": text, "threads": t,
                                "n": args.tokens}) for d in drafters}
                rounds.append({"llama_plain": lp, "llama_spec": ls, "ours": row, "read_GBps": round_bw})
            lp, ls, row = (median_run([r["llama_plain"] for r in rounds]), median_run([r["llama_spec"] for r in rounds]),
                           {d: median_run([r["ours"][d] for r in rounds]) for d in drafters})
            # each round's best drafter against that round's llama.cpp runs, then the median
            vs_plain = statistics.median(best_tok_s(r) / r["llama_plain"]["tok_s"] for r in rounds)
            vs_spec = statistics.median(best_tok_s(r) / r["llama_spec"]["tok_s"] for r in rounds)
            # each drafter against our own plain decoding of its round, fresh processes that may sit in
            # different phases of the memory; the turns in one process above are the measure
            fresh = {d: statistics.median(r["ours"][d]["tok_s"] / r["ours"]["none"]["tok_s"] for r in rounds)
                     for d in drafters if d != "none"}
            result["spec"][name] = {"llama_plain": lp, "llama_spec": ls, "ours": row, "best_vs_llama_plain": vs_plain,
                                    "best_vs_llama_spec": vs_spec, "vs_ours_plain": turns[name],
                                    "vs_ours_plain_fresh": fresh, "rounds": rounds}
            print(f"{name:<11} {lp['tok_s']:11.1f} {ls['tok_s']:10.1f} " +
                  " ".join(f"{row[d]['tok_s']:7.1f} ({(row[d]['acceptance'] or 0) * 100:2.0f}%)"
                           if d != "none" else f"{row[d]['tok_s']:12.1f}" for d in drafters) +
                  f"  {vs_plain:15.2f}x {vs_spec:14.2f}x", flush=True)
            print(f"{'':<11} each drafter / ours plain, in turns in one process: " +
                  ", ".join(f"{d.split('-')[-1]} {v:.2f}x" for d, v in turns[name].items()) +
                  "; in the fresh processes above: " + ", ".join(f"{d.split('-')[-1]} {v:.2f}x" for d, v in fresh.items()) +
                  "; read GB/s before each round: " + ", ".join(f"{r['read_GBps']:.1f}" for r in rounds), flush=True)
        if args.reps > 1:
            print(f"(medians of {args.reps} rounds; the ratios are medians of each round's ratio)")
    out_dir = HERE / "out"
    out_dir.mkdir(exist_ok=True)
    stem = "compare" if not args.isa else f"compare-{args.isa}"
    path = out_dir / f"{stem}.json"
    if args.only and path.exists():
        # --only measures one section: the other one of the file's earlier run stays, marked as such
        keep = "spec" if args.only == "decode" else "models"
        try:
            old = json.loads(path.read_text())
        except ValueError:
            old = {}
        if old.get(keep) and not result[keep]:
            result[keep] = old[keep]
            result["earlier_run"] = {"section": keep, "date": old.get("date"), "read_GBps": old.get("read_GBps")}
    path.write_text(json.dumps(result, indent=1))
    try:
        plot(result, out_dir / f"{stem}.png")
    except ImportError:
        print("(matplotlib not installed: no plot; pip install quickdraft[bench])")
    print(f"\nsaved {out_dir / (stem + '.json')}")


if __name__ == "__main__":
    main()
