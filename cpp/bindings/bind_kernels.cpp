// Test and benchmark hooks for the CPU kernels: quickdraft._core.kernels.matmul / bench_matmul,
// and the ISA dispatch state (_core.isa_available(), _core.current_isa()).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/cpu_features.h"
#include "common/error.h"
#include "common/thread_pool.h"
#include "cpu/act_layout.h"
#include "cpu/convert.h"
#include "cpu/describe.h"
#include "cpu/kernels.h"
#include "cpu/matmul.h"
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

}  // namespace

void register_kernels(py::module_& m) {
  m.def(
      "isa_available",
      [] {
        std::vector<std::string> out;
        for (qd::Isa isa : qd::available_isas()) out.push_back(qd::isa_name(isa));
        return out;
      },
      "Kernel ISAs this build and CPU can run, scalar first.");
  m.def("current_isa", [] { return std::string(qd::isa_name(qd::active_isa())); },
        "The ISA matmul uses: the best available, or QD_FORCE_ISA.");

  py::module_ k = m.def_submodule("kernels", "CPU kernel test and benchmark hooks");
  k.def("describe", [] { return qd::cpu::describe_tables(); },
        "The kernel table as text: for each ISA built into this binary (columns) and each GGML type\n"
        "and routine (rows), the kernel that serves it: simd (the ISA's own), scalar (the shared\n"
        "reference), dequant (dequantize + f32 dot), unsupported; and the activation format.");
  k.def(
      "table",
      [] {
        py::dict out;
        for (qd::Isa isa : qd::built_isas()) {
          py::dict rows;
          for (const qd::cpu::RoutineInfo& r : qd::cpu::describe_table(isa)) {
            rows[py::str(r.routine)] = py::make_tuple(qd::cpu::kernel_kind_name(r.kind), r.act);
          }
          out[qd::isa_name(isa)] = rows;
        }
        return out;
      },
      "describe() as data: {isa: {routine: (kind, activation format)}} for every ISA built here.");
  k.def(
      "built_isas",
      [] {
        std::vector<std::string> out;
        for (qd::Isa isa : qd::built_isas()) out.push_back(qd::isa_name(isa));
        return out;
      },
      "ISAs this build has kernels for, whether or not this CPU can run them, scalar first.");
  k.def(
      "matmul",
      [](py::buffer weight, uint32_t type, int64_t rows, int64_t cols, FloatArray x, std::optional<std::string> isa,
         int threads) {
        const py::buffer_info wb = weight.request();
        const qd::cpu::Matrix w = make_matrix(wb, type, rows, cols);
        if (x.ndim() != 2 || x.shape(1) != cols) throw qd::ArgError("x must have shape (n, cols)");
        const int64_t n = x.shape(0);
        FloatArray y({n, rows});
        const qd::Isa which = isa_or_active(isa);
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
      py::arg("threads") = 1, "y[n, rows] = x[n, cols] @ W.T for W given as raw GGML blocks (rows x cols).");
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
         std::optional<std::string> isa) {
        const py::buffer_info wb = weight.request();
        const qd::cpu::Matrix w = make_matrix(wb, type, rows, cols);
        if (n <= 0 || iters <= 0) throw qd::ArgError("n and iters must be positive");
        std::vector<float> x((size_t)(n * cols)), y((size_t)(n * rows));
        for (size_t i = 0; i < x.size(); i++) x[i] = (float)((i * 2654435761u) % 1000) / 500.f - 1.f;
        const qd::Isa which = isa_or_active(isa);
        qd::ThreadPool& pool = pool_of(threads);
        py::gil_scoped_release release;
        qd::cpu::matmul(w, x.data(), n, y.data(), pool, which);  // warm-up
        double best = 1e30;
        for (int it = 0; it < iters; it++) {
          const auto t0 = std::chrono::steady_clock::now();
          qd::cpu::matmul(w, x.data(), n, y.data(), pool, which);
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          best = std::min(best, s);
        }
        return best;
      },
      py::arg("weight"), py::arg("type"), py::arg("rows"), py::arg("cols"), py::arg("n"), py::arg("threads") = 1,
      py::arg("iters") = 10, py::arg("isa") = py::none(),
      "Best-of-iters seconds of one matmul of n random activation rows (warm caches, timed in C++).");
}
