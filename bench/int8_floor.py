"""How close the AVX2 tall tiles run to this core's floor for their instruction mix (x86 only).

    PYTHONPATH=python python bench/int8_floor.py [--cc cc] [--cols 8960]

A verify of several rows is bound by the cores, not memory: its time is that of the tall tiles
(cpu/x86/avx2/rows8_common.h, rows8_tall), whose unit of work is one sub-block: 8 weight rows x
32 weights against 8 activation rows, 64 `vpmaddubsw` (2048 multiply-adds). Without VNNI each
product needs a `vpaddw` into its int16 sum, so the least a sub-block can cost is its 64 products
and 56 adds with the adds depending on the products. This compiles small loops of those
instructions (inline assembly, the compiler given by --cc) and times them on one core:

- clock: a chain of dependent integer adds (one a cycle), to turn seconds into cycles;
- products: 64 `vpmaddubsw` alone (the multiply ports' bound);
- products + sums: the 64 products with their 56 dependent adds, two chains a row (the floor);
- Q4_K sub-block: that plus what the kernel adds (unpacking 8 weight vectors, one `vpmaddwd` by
  the sub-block's scale and one `vpaddd` into memory per row), in a loop of its own;

then the Q4_K tall tile itself (`_core._testing.kernels.bench_matmul`, 8 rows, one thread), whose
cycles per sub-block include its block ends (mins, scales, float FMAs), its broadcasts and the
weights' trip from memory. Cycles assume the clock measured here; they are this core's, not a
count from hardware counters (a VM has none).
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from quickdraft import _core

from kernels import T, random_weight

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
#define LOOP(name, body) static double name(long n, char* x, char* w, char* s) { \
  double best = 1e9; \
  for (int rep = 0; rep < 5; rep++) { long i = n; double t = now(); \
    __asm__ volatile("vpcmpeqb %%ymm12, %%ymm12, %%ymm12\n vpsrlw $12, %%ymm12, %%ymm12\n vpsrlw $4, %%ymm12, %%ymm8\n" \
                     "1:\n" body "dec %0\n jnz 1b\n" : "+r"(i) : "a"(x), "S"(w), "d"(s) : "memory", \
                     "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", \
                     "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"); \
    t = now() - t; if (t < best) best = t; } \
  return best / n; }
static double clock_ghz(long n) {
  double best = 1e9;
  for (int rep = 0; rep < 5; rep++) { long i = n, x = 0; double t = now();
    __asm__ volatile("1:\n add $1, %1\n add $1, %1\n add $1, %1\n add $1, %1\n dec %0\n jnz 1b\n" : "+r"(i), "+r"(x));
    t = now() - t; if (t < best) best = t; }
  return 4.0 * n / best / 1e9; }
LOOP(products, PRODUCTS)
LOOP(products_sums, PRODUCTS_SUMS)
LOOP(q4k_sub_block, Q4K_SUB_BLOCK)
int main(void) {
  char *x = aligned_alloc(64, 1 << 16), *w = aligned_alloc(64, 4096), *s = aligned_alloc(64, 4096);
  for (int i = 0; i < 1 << 16; i++) x[i] = (char)(rand() % 200 - 100);
  for (int i = 0; i < 4096; i++) { w[i] = (char)rand(); s[i] = 0; }
  const double ghz = clock_ghz(200000000);
  printf("%f %f %f %f\n", ghz, products(2000000, x, w, s) * ghz * 1e9, products_sums(2000000, x, w, s) * ghz * 1e9,
         q4k_sub_block(2000000, x, w, s) * ghz * 1e9);
  return 0; }
"""


def asm(lines: list[str]) -> str:
    return "".join(f'"{line}\\n"' for line in lines)


def products() -> list[str]:
    """Row j's product of k-group g: weight vector g (ymm0-7, in registers) against the broadcast
    activations at rax + 256 j + 32 g, into ymm9-11 and 13-15 in turn."""
    out = [f"vpmaddubsw {0x100 * j + 32 * g}(%%rax), %%ymm{g}, %%ymm{(9, 10, 11, 13, 14, 15)[(8 * j + g) % 6]}"
           for j in range(8) for g in range(8)]
    return out


def row_sums(j: int, body: list[str], scale: bool) -> None:
    """Row j as the tall tile computes it: two chains of 4 products (groups 0-3 and 4-7) summed
    in int16 and joined; with `scale`, one vpmaddwd by the scale (ymm8) and a vpaddd into memory."""
    a, b, t, u = 9, 10, 11, 13
    base = 0x100 * j
    body += [f"vpmaddubsw {base}(%%rax), %%ymm0, %%ymm{a}", f"vpmaddubsw {base + 128}(%%rax), %%ymm4, %%ymm{b}"]
    for g in range(1, 4):
        body += [f"vpmaddubsw {base + 32 * g}(%%rax), %%ymm{g}, %%ymm{t}",
                 f"vpmaddubsw {base + 128 + 32 * g}(%%rax), %%ymm{g + 4}, %%ymm{u}",
                 f"vpaddw %%ymm{t}, %%ymm{a}, %%ymm{a}", f"vpaddw %%ymm{u}, %%ymm{b}, %%ymm{b}"]
    body.append(f"vpaddw %%ymm{b}, %%ymm{a}, %%ymm{a}")
    if scale:
        body += [f"vpmaddwd %%ymm8, %%ymm{a}, %%ymm{a}", f"vpaddd {32 * j}(%%rdx), %%ymm{a}, %%ymm{a}",
                 f"vmovdqa %%ymm{a}, {32 * j}(%%rdx)"]


def sub_block(scale: bool, unpack: bool) -> list[str]:
    body = [f"vpand {32 * g}(%%rsi), %%ymm12, %%ymm{g}" for g in range(8)] if unpack else []
    for j in range(8):
        row_sums(j, body, scale)
    return body


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cc", default="cc", help="C compiler for the loops (GNU inline assembly)")
    ap.add_argument("--cols", type=int, default=8960, help="columns of the Q4_K matrix timed (1536 rows)")
    ap.add_argument("--iters", type=int, default=100)
    a = ap.parse_args()
    if platform.machine() not in ("x86_64", "AMD64") or "avx2" not in _core.isa_available():
        sys.exit("int8_floor: needs an x86-64 CPU with AVX2")
    src = (PROGRAM.replace("PRODUCTS_SUMS", asm(sub_block(scale=False, unpack=False)))
           .replace("PRODUCTS", asm(products()))
           .replace("Q4K_SUB_BLOCK", asm(sub_block(scale=True, unpack=True))))
    with tempfile.TemporaryDirectory() as tmp:
        c, exe = Path(tmp) / "floor.c", Path(tmp) / "floor"
        c.write_text(src)
        subprocess.run([a.cc, "-O2", "-o", str(exe), str(c)], check=True)
        ghz, prod, prod_sums, q4k = (float(v) for v in subprocess.run([str(exe)], capture_output=True, text=True,
                                                                        check=True).stdout.split())
    rows, cols = 1536, a.cols
    w = random_weight(T.Q4_K, rows, cols, np.random.default_rng(0))
    secs = min(_core._testing.kernels.bench_matmul(w, int(T.Q4_K), rows, cols, 8, 1, a.iters, "avx2"))
    kernel = secs * ghz * 1e9 / (rows / 8 * cols / 32)
    print(f"clock {ghz:.2f} GHz (dependent adds); one sub-block = 8 weight rows x 32 weights x 8 activation rows, "
          f"64 vpmaddubsw, 2048 multiply-adds; one core")
    print(f"{'loop':34} {'cycles':>7} {'MAC/cycle':>10} {'x floor':>8}")
    for name, cyc in (("products alone", prod), ("products + int16 sums (floor)", prod_sums),
                      ("Q4_K sub-block as the kernel's", q4k), (f"Q4_K tall tile, 1536 x {cols}", kernel)):
        print(f"{name:34} {cyc:7.1f} {2048 / cyc:10.1f} {cyc / prod_sums:8.2f}")


if __name__ == "__main__":
    main()
