// Test and benchmark hooks for the CPU kernels: quickdraft._core._testing.kernels (matmul,
// bench_matmul, quantize_row, scaled_dots, weighted_rows_add, reduce_lanes, silu_mul, f16_to_f32, f32_to_f16, table).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "common/cpu_features.h"
#include "common/error.h"
#include "common/thread_pool.h"
#include "cpu/act_layout.h"
#include "cpu/convert.h"
#include "cpu/kernels.h"
#include "cpu/matmul.h"
#include "cpu/repack.h"
#include "quant/quant_types.h"

namespace py = pybind11;

namespace {

qd::ThreadPool& pool_of(int threads) {
  static std::map<int, std::unique_ptr<qd::ThreadPool>> pools;  // guarded by the GIL
  if (threads <= 0) threads = qd::ThreadPool::default_threads();
  auto& p = pools[threads];
  if (!p) p = std::make_unique<qd::ThreadPool>(threads);
  return *p;
}

qd::Isa isa_or_active(const std::optional<std::string>& isa) {
  return isa ? qd::parse_isa(*isa) : qd::active_isa();
}

qd::cpu::Matrix make_matrix(const py::buffer_info& wb, uint32_t type, int64_t rows, int64_t cols) {
  const qd::quant::TypeTraits* t = qd::quant::type_traits(type);
  if (!t) throw qd::ArgError("unknown GGML type id " + std::to_string(type));
  if (rows <= 0 || cols <= 0 || cols % t->block_size != 0) {
    throw qd::ArgError("bad shape " + std::to_string(rows) + "x" + std::to_string(cols) + " for " + t->name +
                       ": cols must be a positive multiple of " + std::to_string(t->block_size));
  }
  const size_t row_bytes = (size_t)(cols / t->block_size * t->type_size);
  const size_t have = (size_t)wb.size * (size_t)wb.itemsize;
  if (have < row_bytes * (size_t)rows) {
    throw qd::ArgError("weight buffer has " + std::to_string(have) + " bytes, need " +
                       std::to_string(row_bytes * (size_t)rows));
  }
  return {(const uint8_t*)wb.ptr, type, cols, rows, row_bytes};
}

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

// The weights as `isa`'s kernels see them after loading: repacked into *store when the ISA has a
// rows8 kernel for the type (layout "auto"), always ("rows8", where the type has the layout) or
// never ("gguf").
qd::cpu::Matrix laid_out(const qd::cpu::Matrix& w, qd::Isa isa, const std::string& layout,
                         qd::cpu::Rows8Buffer* store) {
  bool repack;
  if (layout == "auto") {
    repack = qd::cpu::rows8_wanted(w, isa);
  } else if (layout == "rows8") {
    if (!qd::cpu::rows8_supported(w.type) || w.rows % 8 != 0) {
      throw qd::ArgError("layout 'rows8' needs a type with that layout and rows a multiple of 8");
    }
    repack = true;
  } else if (layout == "gguf") {
    repack = false;
  } else {
    throw qd::ArgError("layout must be 'auto', 'rows8' or 'gguf', got '" + layout + "'");
  }
  if (!repack) return w;
  *store = qd::cpu::rows8_alloc(w);
  return qd::cpu::repack_rows8(w, store->get(), false, 0);
}

using HalfArray = py::array_t<uint16_t, py::array::c_style | py::array::forcecast>;

template <class V>
FloatArray weighted_rows_add_hook(FloatArray w, V v, int lane0, FloatArray partial, std::optional<std::string> isa) {
  // one query (w [rows], partial [16][n]) or a batch (w [nq][rows], partial [nq][16][n])
  const bool batch = w.ndim() == 2;
  const int64_t nq = batch ? w.shape(0) : 1;
  if (w.ndim() < 1 || w.ndim() > 2 || v.ndim() != 2 || v.shape(0) != w.shape(w.ndim() - 1) ||
      partial.ndim() != w.ndim() + 1 || (batch && partial.shape(0) != nq) ||
      partial.shape(partial.ndim() - 2) != qd::cpu::kAttentionLanes ||
      partial.shape(partial.ndim() - 1) != v.shape(1) || lane0 < 0) {
    throw qd::ArgError(
        "weighted_rows_add: w [rows] or [nq][rows], v [rows][n], partial [16][n] or [nq][16][n], lane0 >= 0");
  }
  FloatArray out(std::vector<py::ssize_t>(partial.shape(), partial.shape() + partial.ndim()));
  std::copy(partial.data(), partial.data() + partial.size(), out.mutable_data());
  const int64_t rows = v.shape(0), n = v.shape(1);
  std::vector<const float*> ws((size_t)nq);
  std::vector<float*> ps((size_t)nq);
  for (int64_t j = 0; j < nq; j++) {
    ws[(size_t)j] = w.data() + j * rows;
    ps[(size_t)j] = out.mutable_data() + j * qd::cpu::kAttentionLanes * n;
  }
  const qd::cpu::KernelTable& t = qd::cpu::kernel_table(isa_or_active(isa));
  if constexpr (std::is_same_v<V, HalfArray>) {
    t.weighted_rows_add_f16(ws.data(), ps.data(), (int)nq, v.data(), (int)rows, (int)n, lane0);
  } else {
    t.weighted_rows_add(ws.data(), ps.data(), (int)nq, v.data(), (int)rows, (int)n, lane0);
  }
  return out;
}

template <class K>
FloatArray scaled_dots_hook(FloatArray q, K k, float scale, std::optional<std::string> isa) {
  if (q.ndim() != 2 || k.ndim() != 2 || q.shape(1) != k.shape(1)) {
    throw qd::ArgError("scaled_dots: q [nq][n], k [rows][n]");
  }
  const int64_t nq = q.shape(0), rows = k.shape(0), n = k.shape(1);
  FloatArray out({nq, rows});
  std::vector<const float*> qs((size_t)nq);
  std::vector<float*> os((size_t)nq);
  for (int64_t j = 0; j < nq; j++) {
    qs[(size_t)j] = q.data() + j * n;
    os[(size_t)j] = out.mutable_data() + j * rows;
  }
  const qd::cpu::KernelTable& t = qd::cpu::kernel_table(isa_or_active(isa));
  if constexpr (std::is_same_v<K, HalfArray>) {
    t.scaled_dots_f16(qs.data(), os.data(), (int)nq, k.data(), (int)rows, (int)n, scale);
  } else {
    t.scaled_dots(qs.data(), os.data(), (int)nq, k.data(), (int)rows, (int)n, scale);
  }
  return out;
}

}  // namespace

void register_kernel_hooks(py::module_& k) {
  k.def(
      "table",
      [](const std::string& isa) {
        const qd::cpu::KernelTable& t = qd::cpu::kernel_table(qd::parse_isa(isa));
        py::dict gemm;
        for (uint32_t type = 0; type < qd::cpu::kMaxTypeId; type++)
          if (t.gemm[type].fn) gemm[py::int_(type)] = (int)t.gemm[type].act;
        py::list quantize;
        for (qd::cpu::QuantizeRowFn f : t.quantize) quantize.append(f != nullptr);
        py::dict d;
        d["isa"] = std::string(qd::isa_name(t.isa));
        d["half_to_float"] = t.half_to_float != nullptr;
        d["float_to_half"] = t.float_to_half != nullptr;
        d["quantize"] = quantize;
        d["gemm"] = gemm;
        return d;
      },
      py::arg("isa"),
      "The ISA's kernel table: which entries are set ({type id: activation format} for gemm, bools else).");
  k.def(
      "matmul",
      [](py::buffer weight, uint32_t type, int64_t rows, int64_t cols, FloatArray x, std::optional<std::string> isa,
         int threads, const std::string& layout) {
        const py::buffer_info wb = weight.request();
        const qd::Isa which = isa_or_active(isa);
        qd::cpu::Rows8Buffer store;
        const qd::cpu::Matrix w = laid_out(make_matrix(wb, type, rows, cols), which, layout, &store);
        if (x.ndim() != 2 || x.shape(1) != cols) throw qd::ArgError("x must have shape (n, cols)");
        const int64_t n = x.shape(0);
        FloatArray y({n, rows});
        qd::ThreadPool& pool = pool_of(threads);
        const float* xp = x.data();
        float* yp = y.mutable_data();
        {
          py::gil_scoped_release release;
          qd::cpu::matmul(w, xp, n, yp, pool, which);
        }
        return y;
      },
      py::arg("weight"), py::arg("type"), py::arg("rows"), py::arg("cols"), py::arg("x"), py::arg("isa") = py::none(),
      py::arg("threads") = 1, py::arg("layout") = "auto",
      "y[n, rows] = x[n, cols] @ W.T for W given as raw GGML blocks (rows x cols), laid out as loading would "
      "('auto'), or forced to the 'rows8' or 'gguf' layout.");
  k.def(
      "rows8_roundtrip",
      [](py::buffer weight, uint32_t type, int64_t rows, int64_t cols, bool packed) {
        const py::buffer_info wb = weight.request();
        qd::cpu::Rows8Buffer store;
        const qd::cpu::Matrix w = laid_out(make_matrix(wb, type, rows, cols), qd::Isa::scalar, "rows8", &store);
        if (packed) {
          py::array_t<uint8_t> bytes((py::ssize_t)qd::cpu::rows8_bytes(w));
          std::memcpy(bytes.mutable_data(), w.data, (size_t)bytes.size());
          return bytes;
        }
        py::array_t<uint8_t> out({(py::ssize_t)rows, (py::ssize_t)w.row_bytes});
        for (int64_t r = 0; r < rows; r++) qd::cpu::copy_row(w, r, out.mutable_data() + (size_t)r * w.row_bytes);
        return out;
      },
      py::arg("weight"), py::arg("type"), py::arg("rows"), py::arg("cols"), py::arg("packed") = false,
      "The weights repacked to the rows8 layout and each row copied back to the GGUF layout; with packed, "
      "the repacked bytes themselves, as the kernels read them.");
  k.def(
      "requantize_roundtrip",
      [](py::buffer weight, uint32_t type, uint32_t to, int64_t rows, int64_t cols, const std::string& layout) {
        const py::buffer_info wb = weight.request();
        const qd::cpu::Matrix w = make_matrix(wb, type, rows, cols);
        const qd::cpu::Matrix shape = qd::cpu::requantized_shape(w, to);
        qd::cpu::Matrix q;
        qd::cpu::Rows8Buffer packed;
        std::vector<uint8_t> plain;
        if (layout == "rows8") {
          packed = qd::cpu::rows8_alloc(shape);
          q = qd::cpu::requantize_rows8(w, to, packed.get(), false, 0);
        } else if (layout == "gguf") {
          plain.resize(shape.row_bytes * (size_t)rows);
          q = qd::cpu::requantize(w, to, plain.data(), false, 0);
        } else {
          throw qd::ArgError("requantize_roundtrip: layout must be 'rows8' or 'gguf', got '" + layout + "'");
        }
        py::array_t<uint8_t> out({(py::ssize_t)rows, (py::ssize_t)q.row_bytes});
        for (int64_t r = 0; r < rows; r++) qd::cpu::copy_row(q, r, out.mutable_data() + (size_t)r * q.row_bytes);
        return out;
      },
      py::arg("weight"), py::arg("type"), py::arg("to"), py::arg("rows"), py::arg("cols"), py::arg("layout"),
      "The weights requantized to `to` on every core (as a draft model's at load), straight into the rows8 "
      "layout or in the GGUF layout, and each row copied back to the GGUF layout.");
  k.def("rows8_supported", &qd::cpu::rows8_supported, py::arg("type"), "Whether a GGML type has the rows8 layout.");
  k.def(
      "repacks",
      [](uint32_t type, std::optional<std::string> isa) {
        qd::cpu::Matrix w;
        w.type = type;
        w.rows = 8;
        return qd::cpu::rows8_wanted(w, isa_or_active(isa));
      },
      py::arg("type"), py::arg("isa") = py::none(),
      "Whether loading repacks weights of this type (rows a multiple of 8) for the ISA's kernels.");
  k.def(
      "weighted_rows_add",
      &weighted_rows_add_hook<FloatArray>,
      py::arg("w"), py::arg("v"), py::arg("lane0"), py::arg("partial"), py::arg("isa") = py::none(),
      "partial [16][n] (or [nq][16][n], one per row of w) after adding w[r] * v[r] to lane (lane0 + r) % 16, rows "
      "in order (a copy).");
  k.def(
      "scaled_dots",
      &scaled_dots_hook<FloatArray>,
      py::arg("q"), py::arg("k"), py::arg("scale"), py::arg("isa") = py::none(),
      "out[j][r] = scale * (q[j] . k[r]): one batched call of the ISA's attention score kernel.");
  k.def("weighted_rows_add_f16", &weighted_rows_add_hook<HalfArray>, py::arg("w"), py::arg("v_bits"), py::arg("lane0"),
        py::arg("partial"), py::arg("isa") = py::none(),
        "weighted_rows_add with the values given as F16 bit patterns (uint16): the ISA's F16 entry.");
  k.def("scaled_dots_f16", &scaled_dots_hook<HalfArray>, py::arg("q"), py::arg("k_bits"), py::arg("scale"),
        py::arg("isa") = py::none(), "scaled_dots with the keys given as F16 bit patterns (uint16): the ISA's F16 entry.");
  k.def(
      "reduce_lanes",
      [](FloatArray partial, std::optional<std::string> isa) {
        if (partial.ndim() != 2 || partial.shape(0) != qd::cpu::kAttentionLanes) {
          throw qd::ArgError("reduce_lanes: partial [16][n]");
        }
        FloatArray out(partial.shape(1));
        qd::cpu::kernel_table(isa_or_active(isa)).reduce_lanes(partial.data(), (int)partial.shape(1), out.mutable_data());
        return out;
      },
      py::arg("partial"), py::arg("isa") = py::none(), "The 16 lanes' partial sums of each column, summed (one fixed tree).");
  k.def(
      "silu_mul",
      [](FloatArray gate, FloatArray up, std::optional<std::string> isa) {
        if (gate.ndim() != 1 || up.ndim() != 1 || gate.size() != up.size()) {
          throw qd::ArgError("silu_mul: gate and up are 1-D arrays of one length");
        }
        FloatArray out(gate.size());
        std::copy(gate.data(), gate.data() + gate.size(), out.mutable_data());
        qd::cpu::kernel_table(isa_or_active(isa)).silu_mul(out.mutable_data(), up.data(), (int64_t)gate.size());
        return out;
      },
      py::arg("gate"), py::arg("up"), py::arg("isa") = py::none(), "silu(gate) * up (a copy).");
  k.def(
      "f16_to_f32",
      [](py::array_t<uint16_t, py::array::c_style | py::array::forcecast> h, std::optional<std::string> isa) {
        py::array_t<float> out(h.size());
        qd::cpu::fp16_to_fp32_row(h.data(), out.mutable_data(), h.size(), isa_or_active(isa));
        return out;
      },
      py::arg("bits"), py::arg("isa") = py::none(), "IEEE half bit patterns (uint16) -> float32, 1-D.");
  k.def(
      "f32_to_f16",
      [](FloatArray x, std::optional<std::string> isa) {
        py::array_t<uint16_t> out(x.size());
        qd::cpu::fp32_to_fp16_row(x.data(), out.mutable_data(), x.size(), isa_or_active(isa));
        return out;
      },
      py::arg("x"), py::arg("isa") = py::none(), "float32 -> IEEE half bit patterns (uint16), round to nearest even.");
  k.def(
      "quantize_row",
      [](FloatArray x, const std::string& format, std::optional<std::string> isa) {
        qd::cpu::ActFormat f;
        if (format == "q8_0") {
          f = qd::cpu::ActFormat::q8_0;
        } else if (format == "q8_K") {
          f = qd::cpu::ActFormat::q8_K;
        } else {
          throw qd::ArgError("format must be q8_0 or q8_K");
        }
        const int64_t cols = x.size();
        if (x.ndim() != 1 || cols % (f == qd::cpu::ActFormat::q8_0 ? 32 : 256) != 0) {
          throw qd::ArgError("x must be 1-D with a whole number of blocks");
        }
        const qd::cpu::KernelTable& t = qd::cpu::kernel_table(isa_or_active(isa));
        py::array_t<uint8_t> out((py::ssize_t)qd::cpu::act_row_bytes(f, cols));
        uint8_t* dst = out.mutable_data();
        std::fill(dst, dst + out.size(), 0);
        t.quantize[(int)f](x.data(), cols, dst);
        py::dict parts;
        if (f == qd::cpu::ActFormat::q8_0) {
          const qd::cpu::ActQ8_0 a = qd::cpu::act_q8_0(dst, cols);
          parts["qs"] = py::array_t<int8_t>(cols, a.qs);
          parts["d"] = py::array_t<float>(cols / 32, a.d);
          parts["s"] = py::array_t<float>(cols / 32, a.s);
          parts["d8"] = py::array_t<float>(cols / 32 * 8, a.d8);
          parts["d2"] = py::array_t<float>(cols / 32 * 2, a.d2);
          parts["qsg"] = py::array_t<int8_t>(cols, a.qsg);
          parts["sm"] = py::array_t<float>(cols / 32, a.sm);
          parts["a4"] = py::array_t<int32_t>(cols / 4, a.a4);
        } else {
          const qd::cpu::ActQ8_K a = qd::cpu::act_q8_K(dst, cols);
          parts["qs"] = py::array_t<int8_t>(cols, a.qs);
          parts["d"] = py::array_t<float>(cols / 256, a.d);
          parts["bsums"] = py::array_t<int16_t>(cols / 16, a.bsums);
          parts["dsums"] = py::array_t<float>(cols / 16, a.dsums);
          parts["qsg"] = py::array_t<int8_t>(cols, a.qsg);
          parts["qsg16"] = py::array_t<int8_t>(cols, a.qsg16);
          parts["osg16"] = py::array_t<int32_t>(cols / 16, a.osg16);
        }
        return parts;
      },
      py::arg("x"), py::arg("format"), py::arg("isa") = py::none(),
      "One activation row quantized as the kernels see it: dict of its regions (qs, d, ...).");
  k.def(
      "bench_matmul",
      [](py::buffer weight, uint32_t type, int64_t rows, int64_t cols, int64_t n, int threads, int iters,
         std::optional<std::string> isa, const std::string& layout) -> std::vector<double> {
        const py::buffer_info wb = weight.request();
        const qd::Isa which0 = isa_or_active(isa);
        qd::cpu::Rows8Buffer store;
        const qd::cpu::Matrix w = laid_out(make_matrix(wb, type, rows, cols), which0, layout, &store);
        if (n <= 0 || iters <= 0) throw qd::ArgError("n and iters must be positive");
        std::vector<float> x((size_t)(n * cols)), y((size_t)(n * rows));
        for (size_t i = 0; i < x.size(); i++) x[i] = (float)((i * 2654435761u) % 1000) / 500.f - 1.f;
        const qd::Isa which = isa_or_active(isa);
        qd::ThreadPool& pool = pool_of(threads);
        py::gil_scoped_release release;
        qd::cpu::matmul(w, x.data(), n, y.data(), pool, which);  // warm-up
        std::vector<double> secs((size_t)iters);
        for (double& s : secs) {
          const auto t0 = std::chrono::steady_clock::now();
          qd::cpu::matmul(w, x.data(), n, y.data(), pool, which);
          s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        return secs;
      },
      py::arg("weight"), py::arg("type"), py::arg("rows"), py::arg("cols"), py::arg("n"), py::arg("threads") = 1,
      py::arg("iters") = 10, py::arg("isa") = py::none(), py::arg("layout") = "auto",
      "Seconds of each of iters matmuls of n random activation rows, in order (after a warm-up call; timed in C++).");
}
