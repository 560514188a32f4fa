// The choice of kernel table (cpu/kernels.h), the row conversions that go through it
// (cpu/convert.h), and its description (cpu/describe.h).
#include <cstring>
#include <string>

#include "common/error.h"
#include "cpu/convert.h"
#include "cpu/describe.h"
#include "cpu/repack.h"
#include "cpu/kernels.h"
#include "cpu/scalar/kernels.h"
#include "quant/quant_types.h"

namespace qd::cpu {

const KernelTable& built_table(Isa isa) {
  if (!isa_built(isa)) throw ArgError(std::string("ISA ") + isa_name(isa) + " is not built into this quickdraft");
  switch (isa) {
    case Isa::scalar: break;
#ifdef QD_HAVE_X86_KERNELS
    case Isa::avx2: return kernels_avx2();
    case Isa::avx2_vnni: return kernels_avx2_vnni();
    case Isa::avx512: return kernels_avx512();
#endif
#ifdef QD_HAVE_ARM_KERNELS
    case Isa::neon: return kernels_neon();
    case Isa::neon_dot: return kernels_neon_dot();
#endif
    default: break;
  }
  return kernels_scalar();
}

const KernelTable& kernel_table(Isa isa) {
  if (!isa_available(isa)) throw ArgError(std::string("ISA ") + isa_name(isa) + " is not available on this CPU/build");
  return built_table(isa);
}

const KernelTable& active_kernels() {
  static const KernelTable& t = kernel_table(active_isa());
  return t;
}

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n, Isa isa) {
  kernel_table(isa).half_to_float(src, dst, n);
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n, Isa isa) {
  kernel_table(isa).float_to_half(src, dst, n);
}

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) { active_kernels().half_to_float(src, dst, n); }

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) { active_kernels().float_to_half(src, dst, n); }

const char* kernel_kind_name(KernelKind k) {
  switch (k) {
    case KernelKind::simd: return "simd";
    case KernelKind::scalar: return "scalar";
    case KernelKind::dequant: return "dequant";
    case KernelKind::unsupported: return "unsupported";
    case KernelKind::missing: return "MISSING";
    case KernelKind::not_repacked: return "-";
  }
  return "?";
}

namespace {

const char* act_name(ActFormat f) {
  switch (f) {
    case ActFormat::f32: return "f32";
    case ActFormat::q8_0: return "q8_0";
    case ActFormat::q8_K: return "q8_K";
  }
  return "?";
}

// A routine is "scalar" when it is the scalar table's own function.
template <class Fn>
KernelKind kind_of(Fn fn, Fn scalar_fn) {
  if (!fn) return KernelKind::missing;
  return fn == scalar_fn ? KernelKind::scalar : KernelKind::simd;
}

}  // namespace

std::vector<RoutineInfo> describe_table(Isa isa) {
  const KernelTable& t = built_table(isa);
  const KernelTable& s = kernels_scalar();
  std::vector<RoutineInfo> out;
  for (uint32_t id = 0; id < kMaxTypeId; id++) {
    const quant::TypeTraits* traits = quant::type_traits(id);
    if (!traits) continue;
    const GemmKernel& k = t.gemm[id];
    KernelKind kind = kind_of(k.fn, s.gemm[id].fn);
    if (k.fn == scalar::gemm_dequant) kind = KernelKind::dequant;
    if (k.fn == scalar::gemm_unsupported) kind = KernelKind::unsupported;
    const bool computes = kind != KernelKind::unsupported && kind != KernelKind::missing;
    out.push_back({traits->name, kind, computes ? act_name(k.act) : ""});
  }
  for (uint32_t id = 0; id < kMaxTypeId; id++) {
    if (!rows8_supported(id)) continue;
    const GemmKernel& k = t.rows8[id];
    out.push_back({std::string(quant::type_traits(id)->name) + " rows8", k.fn ? KernelKind::simd : KernelKind::not_repacked,
                   k.fn ? act_name(k.act) : ""});
  }
  auto add = [&](const char* name, KernelKind kind) { out.push_back({name, kind, ""}); };
  add("quantize q8_0", kind_of(t.quantize[(int)ActFormat::q8_0], s.quantize[(int)ActFormat::q8_0]));
  add("quantize q8_K", kind_of(t.quantize[(int)ActFormat::q8_K], s.quantize[(int)ActFormat::q8_K]));
  add("half_to_float", kind_of(t.half_to_float, s.half_to_float));
  add("float_to_half", kind_of(t.float_to_half, s.float_to_half));
  add("half_to_float_rows", kind_of(t.half_to_float_rows, s.half_to_float_rows));
  add("scaled_dots", kind_of(t.scaled_dots, s.scaled_dots));
  add("softmax", kind_of(t.softmax, s.softmax));
  add("weighted_rows_add", kind_of(t.weighted_rows_add, s.weighted_rows_add));
  add("reduce_lanes", kind_of(t.reduce_lanes, s.reduce_lanes));
  add("scaled_dots_f16", kind_of(t.scaled_dots_f16, s.scaled_dots_f16));
  add("weighted_rows_add_f16", kind_of(t.weighted_rows_add_f16, s.weighted_rows_add_f16));
  add("silu_mul", kind_of(t.silu_mul, s.silu_mul));
  add("rope", kind_of(t.rope, s.rope));
  return out;
}

std::string describe_tables() {
  const std::vector<Isa> isas = built_isas();
  std::vector<std::vector<RoutineInfo>> cols;
  for (Isa isa : isas) cols.push_back(describe_table(isa));
  auto pad = [](std::string s, size_t w) {
    if (s.size() < w) s.append(w - s.size(), ' ');
    return s;
  };
  constexpr size_t kFirst = 20, kCol = 14;
  std::string text = pad("routine", kFirst);
  for (Isa isa : isas) text += pad(isa_name(isa), kCol);
  while (text.back() == ' ') text.pop_back();
  text += "\n";
  for (size_t r = 0; r < cols[0].size(); r++) {
    std::string line = pad(cols[0][r].routine, kFirst);
    for (const auto& col : cols) {
      const RoutineInfo& e = col[r];
      line += pad(std::string(kernel_kind_name(e.kind)) + (e.act.empty() ? "" : " " + e.act), kCol);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + "\n";
  }
  return text;
}

}  // namespace qd::cpu
