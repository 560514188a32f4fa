// Benchmark hook for attention over the KV cache: quickdraft._core._testing.kernels.bench_attention.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "model/kv_cache.h"

namespace py = pybind11;

void register_attention_hooks(py::module_& k) {
  k.def(
      "bench_attention",
      [](int depth, int n, int n_head, int n_head_kv, int head_dim, int layers, int threads, int iters) {
        if (depth < 1 || n < 1 || n_head < 1 || n_head_kv < 1 || n_head % n_head_kv != 0 || head_dim < 1 ||
            layers < 1 || threads < 1 || iters < 1 || depth + n > (1 << 20)) {
          throw qd::ArgError("bench_attention: positive sizes, n_head a multiple of n_head_kv");
        }
        const int n_ctx = depth + n;
        qd::KvCache kv(layers, n_ctx, n_head_kv, head_dim);
        const size_t kv_dim = (size_t)n_head_kv * head_dim, q_dim = (size_t)n_head * head_dim;
        std::vector<float> row(kv_dim * 64);
        uint32_t seed = 12345;
        auto next = [&] {
          seed = seed * 1664525u + 1013904223u;
          return (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
        };
        for (int il = 0; il < layers; il++) {
          for (int p = 0; p < n_ctx; p += 64) {
            const int m = std::min(64, n_ctx - p);
            for (float& x : row) x = next();
            kv.store(il, p, m, row.data(), row.data());
          }
        }
        std::vector<float> q(q_dim * (size_t)n), out(q_dim * (size_t)n);
        for (float& x : q) x = next();
        qd::AttentionShape shape;
        shape.n_head = n_head;
        shape.n_head_kv = n_head_kv;
        shape.head_dim = head_dim;
        shape.scale = 1.0f / 11.3f;
        qd::ThreadPool pool(threads);
        std::vector<double> secs((size_t)iters);
        py::gil_scoped_release release;
        for (int it = -1; it < iters; it++) {
          const auto t0 = std::chrono::steady_clock::now();
          for (int il = 0; il < layers; il++) qd::attention(kv, il, q.data(), n, depth, shape, out.data(), pool);
          if (it >= 0) secs[(size_t)it] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        return secs;
      },
      py::arg("depth"), py::arg("n"), py::arg("n_head"), py::arg("n_head_kv"), py::arg("head_dim"), py::arg("layers"),
      py::arg("threads") = 1, py::arg("iters") = 10,
      "Seconds of each of iters passes of attention for n query rows after depth positions, over every layer of a "
      "random F16 KV cache (after a warm-up pass; the active ISA's kernels).");
}
