// quickdraft._core.kernels: which kernel serves each type and routine on each ISA of this build.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "common/cpu_features.h"
#include "cpu/describe.h"

namespace py = pybind11;

void register_kernels(py::module_& m) {
  py::module_ k = m.def_submodule("kernels", "The CPU kernel tables of this build");
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
}
