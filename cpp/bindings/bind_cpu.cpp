// quickdraft._core.cpu_features(): what run-time detection saw (CPUID on x86-64, AT_HWCAP on
// aarch64), so users and tests can see why an ISA was or was not chosen; isa_available() and
// current_isa(): the kernel tables this build and CPU can run, and the one matmul uses;
// measure_read_bandwidth(): the memory's read rate, a decode's ceiling.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "common/cpu_features.h"
#include "cpu/read_rate.h"

namespace py = pybind11;

void register_cpu(py::module_& m) {
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

  m.def(
      "cpu_features",
      [] {
        const qd::CpuFeatures& f = qd::cpu_features();
        py::dict d;
        d["avx2"] = f.avx2, d["fma"] = f.fma, d["f16c"] = f.f16c;
        d["avx512f"] = f.avx512f, d["avx512bw"] = f.avx512bw, d["avx512vl"] = f.avx512vl;
        d["avx512dq"] = f.avx512dq, d["avx512vnni"] = f.avx512vnni, d["avx_vnni"] = f.avx_vnni;
        d["amd"] = f.amd;
        d["asimd"] = f.neon, d["asimddp"] = f.dotprod, d["i8mm"] = f.i8mm, d["fp16"] = f.fp16;
        return d;
      },
      "CPU features detected at run time: {name: bool} (x86-64 and aarch64 names).");

  m.def(
      "measure_read_bandwidth",
      [](double mib, int threads, int passes) {
        if (!(mib >= 1 && mib <= 65536)) throw py::value_error("measure_read_bandwidth: mib must lie in [1, 65536]");
        const size_t bytes = (size_t)(mib * (1 << 20));
        qd::cpu::ReadRate r;
        {
          py::gil_scoped_release unlocked;
          r = qd::cpu::measure_read_rate(bytes, threads, passes);
        }
        py::dict d;
        d["best_GBps"] = r.best_gbps, d["median_GBps"] = r.median_gbps, d["checksum"] = r.checksum;
        d["bytes"] = r.bytes, d["threads"] = r.threads;
        return d;
      },
      py::arg("mib") = 512.0, py::arg("threads") = 0, py::arg("passes") = 5,
      "The memory's read rate as a decode sees it: `threads` threads (0: every CPU this process may\n"
      "use) stream a `mib`-MiB buffer on transparent huge pages, allocated as a model's weights are,\n"
      "`passes` times. {best_GBps, median_GBps (1e9 bytes/s), checksum (the wrapping sum of its\n"
      "64-bit words, word i = i * 0x9E3779B97F4A7C15), bytes (whole 4 KiB pages), threads}. Take a\n"
      "buffer several times the last-level cache, or it measures the cache; ValueError past half the\n"
      "machine's memory.");
}
