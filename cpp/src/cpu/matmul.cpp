// matmul(): picks the ISA's kernel for the weight type (cpu/kernels.h), quantizes the activations
// once (one row at a time), and splits the weight rows across the thread pool.
#include "cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "cpu/act_layout.h"
#include "cpu/kernels.h"
#include "cpu/repack.h"
#include "cpu/rows8_order.h"
#include "cpu/scalar/kernels.h"
#include "quant/quant_types.h"

namespace qd::cpu {

namespace {

const quant::TypeTraits& traits_or_throw(uint32_t type) {
  const quant::TypeTraits* t = quant::type_traits(type);
  if (!t) throw UnsupportedError("matmul: unknown GGML type id " + std::to_string(type));
  return *t;
}

// Rows [r0, r1) of a rows8 matrix on an ISA without a rows8 kernel for its type: each row back to
// the GGUF layout, then that ISA's kernel on it (the reference the rows8 kernels are tested
// against, and the path a matrix repacked for one ISA takes on another).
void gemm_rows8_by_row(GemmRowsFn gguf_kernel, const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act,
                       size_t act_stride, int64_t n, float* y, int64_t ldy) {
  thread_local std::vector<uint8_t> row;
  row.resize(w.row_bytes);
  Matrix one = w;
  one.layout = Layout::gguf;
  one.rows = 1;
  one.data = row.data();
  for (int64_t r = r0; r < r1; r++) {
    copy_row(w, r, row.data());
    gguf_kernel(one, 0, 1, act, act_stride, n, y + r, ldy);
  }
}

GemmKernel find_gguf_kernel(const KernelTable& table, const Matrix& w) {
  const quant::TypeTraits& t = traits_or_throw(w.type);
  const GemmKernel k = w.type < kMaxTypeId ? table.gemm[w.type] : GemmKernel{};
  if (!t.to_float || k.fn == scalar::gemm_unsupported) {
    throw UnsupportedError(std::string("matmul: weight type ") + t.name + " is not supported");
  }
  if (!k.fn) {
    throw UnsupportedError(std::string("matmul: the ") + isa_name(table.isa) + " kernel table has no entry for " +
                           t.name);
  }
  return k;
}

// The kernel for w; *by_row: w is a rows8 matrix this ISA serves row by row (gemm_rows8_by_row),
// and the kernel returned is its GGUF-layout one.
GemmKernel find_kernel(const KernelTable& table, const Matrix& w, bool* by_row) {
  *by_row = false;
  if (w.layout == Layout::gguf) return find_gguf_kernel(table, w);
  if (w.type < kMaxTypeId && table.rows8[w.type].fn) return table.rows8[w.type];
  *by_row = true;
  return find_gguf_kernel(table, w);
}

void check_shape(const Matrix& w) {
  const quant::TypeTraits& t = traits_or_throw(w.type);
  if (!w.data || w.rows <= 0 || w.cols <= 0 || w.cols % t.block_size != 0 ||
      w.row_bytes < (size_t)(w.cols / t.block_size * t.type_size)) {
    throw ArgError(std::string("matmul: bad ") + t.name + " matrix " + std::to_string(w.rows) + "x" +
                   std::to_string(w.cols) + " (cols must be a multiple of " + std::to_string(t.block_size) +
                   ", row_bytes " + std::to_string(w.row_bytes) + ")");
  }
}

// Rows per task of a batch above kStealRows: enough tasks to balance the threads, and few enough
// bytes per task that the kernels' repeated passes over the task's weights (one per tile of
// activation rows) hit L2 (up to 16 rows a tile or two barely reuse weights: long tasks). The
// tasks are made equal, as many as a multiple of the thread count: 1536 rows (the 1.5B's
// attn_output and ffn_down) in 7 tasks of 200 and one of 136 kept one thread idle for 8 % of each
// such product; 8 of 192 keep both busy to the end.
int64_t rows_per_task(const Matrix& w, int n_threads, int64_t n) {
  const bool rows8 = w.layout == Layout::rows8;  // whole chunks of the layout (rows8_order.h)
  const size_t task_bytes = n <= 16 ? (size_t)1 << 20 : (size_t)128 << 10;
  int64_t most, align;
  if (rows8) {
    const int64_t per_thread = 4, split = 8 * per_thread * n_threads;
    const int64_t by_balance = (w.rows + split - 1) / split * 8;
    const int64_t by_cache = (int64_t)(task_bytes / std::max<size_t>(8 * w.row_bytes, 1)) * 8;
    most = std::max<int64_t>(8, std::min(by_balance, by_cache));
    align = rows8_chunk_rows(w.type);
  } else {
    const int64_t by_balance = (w.rows + 4 * n_threads - 1) / (4 * n_threads);
    const int64_t by_cache = std::max<int64_t>(1, (int64_t)(task_bytes / std::max<size_t>(w.row_bytes, 1)));
    most = std::max<int64_t>(1, std::min(by_balance, by_cache));
    align = most > 4 ? 4 : 1;
  }
  const int64_t threads = std::max(1, n_threads);
  const int64_t tasks = ((w.rows + most - 1) / most + threads - 1) / threads * threads;
  const int64_t even = (w.rows + tasks - 1) / tasks;
  return std::max<int64_t>(align, (even + align - 1) / align * align);
}

// Per-calling-thread scratch for the quantized activations, 64-byte aligned; grows, never shrinks.
uint8_t* act_scratch(size_t bytes) {
  thread_local std::vector<uint8_t> buf;
  if (buf.size() < bytes + 64) buf.resize(bytes + 64);
  const uintptr_t p = (uintptr_t)buf.data();
  return (uint8_t*)((p + 63) & ~(uintptr_t)63);
}

}  // namespace

void dequantize_row(const Matrix& w, int64_t r, float* dst) {
  const quant::TypeTraits& t = traits_or_throw(w.type);
  if (!t.to_float) throw UnsupportedError(std::string("dequantize_row: unsupported weight type ") + t.name);
  if (w.layout == Layout::rows8) {
    thread_local std::vector<uint8_t> row;
    row.resize(w.row_bytes);
    copy_row(w, r, row.data());
    t.to_float(row.data(), dst, w.cols);
    return;
  }
  t.to_float(w.data + (size_t)r * w.row_bytes, dst, w.cols);
}

namespace {

constexpr int kMaxGroup = 4;  // products in one group (matmul_group)

// One product of a group sharing an input: its kernel and its tasks' place in the group's list.
struct GroupPart {
  const Matrix* w;
  float* y;
  int64_t ldy;
  GemmKernel k;
  bool by_row;
  int64_t chunk, n_chunks, first_task;  // the task split: set only where tasks are used (not matmul_stolen)
};

// Batches of up to kStealRows rows (decode, draft steps, verify) stream the weights and reuse
// them little, so each thread should read one long run of rows and all threads should finish
// together. The group's weight rows, product after product, are cut into chunks of about
// kStealChunk bytes; thread t owns an equal stretch of the chunks and takes them from its front,
// a quarter of what is left at a time (one kernel call per product they span), then takes chunks
// one at a time from the back ends of the other stretches. Against tasks of a fixed size taken in
// turn (2 per thread at one row, 4 above), forced AVX2 on Zen 4, 2 threads, alternated in one
// process (medians of 20-40 rounds): the 0.5B draft's step (Q4_0, 896 wide) 0.91-0.92x the time,
// its forward of 4 tokens 0.94-0.97x; the 1.5B's forward of 2 tokens 0.94-0.95x, of 4 0.98-0.99x,
// its decode 0.99-1.01x. Which thread computes a row never changes its bits.
constexpr int64_t kStealRows = 4;
constexpr size_t kStealChunk = 64 << 10;

void matmul_stolen(const GroupPart* parts, int count, const uint8_t* act, size_t stride, int64_t n, ThreadPool& pool) {
  int64_t chunk_rows[kMaxGroup], first[kMaxGroup + 1];  // product m: chunks [first[m], first[m + 1])
  first[0] = 0;
  for (int m = 0; m < count; m++) {
    const Matrix& w = *parts[m].w;
    const int64_t align = w.layout == Layout::rows8 ? rows8_chunk_rows(w.type) : 1;
    chunk_rows[m] = std::max(align, (int64_t)(kStealChunk / std::max<size_t>(w.row_bytes, 1)) / align * align);
    first[m + 1] = first[m] + (w.rows + chunk_rows[m] - 1) / chunk_rows[m];
  }
  const int T = pool.participants();
  const int64_t G = first[count];
  // Stretch t's chunks not yet taken, [front, back), as front << 32 | back.
  thread_local std::unique_ptr<std::atomic<uint64_t>[]> spans;
  thread_local int n_spans = 0;
  if (n_spans < T) spans.reset(new std::atomic<uint64_t>[n_spans = T]);
  std::atomic<uint64_t>* span = spans.get();
  for (int t = 0; t < T; t++) span[t].store((uint64_t)(G * t / T) << 32 | (uint64_t)(G * (t + 1) / T));
  auto run_chunks = [&](int64_t g0, int64_t g1) {
    for (int m = 0; m < count && g0 < g1; m++) {
      if (g0 >= first[m + 1]) continue;
      const int64_t g_end = std::min(g1, first[m + 1]);
      const GroupPart& p = parts[m];
      const int64_t r0 = (g0 - first[m]) * chunk_rows[m], r1 = std::min(p.w->rows, (g_end - first[m]) * chunk_rows[m]);
      if (p.by_row) {
        gemm_rows8_by_row(p.k.fn, *p.w, r0, r1, act, stride, n, p.y, p.ldy);
      } else {
        p.k.fn(*p.w, r0, r1, act, stride, n, p.y, p.ldy);
      }
      g0 = g_end;
    }
  };
  // Takes chunks from the front (a share of what is left) or one from the back of span s.
  auto take = [](std::atomic<uint64_t>& s, bool front, int64_t* g0, int64_t* g1) {
    uint64_t v = s.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t f = (int64_t)(v >> 32), b = (int64_t)(v & 0xffffffffu);
      if (f >= b) return false;
      const int64_t k = front ? std::max<int64_t>(1, (b - f) / 4) : 1;
      *g0 = front ? f : b - 1;
      *g1 = *g0 + k;
      const uint64_t next = front ? (uint64_t)(f + k) << 32 | (uint64_t)b : (uint64_t)f << 32 | (uint64_t)(b - 1);
      if (s.compare_exchange_weak(v, next, std::memory_order_relaxed)) return true;
    }
  };
  pool.run(T, [&](int t) {
    int64_t g0, g1;
    while (take(span[t], true, &g0, &g1)) run_chunks(g0, g1);
    for (int k = 1; k < T; k++) {
      while (take(span[(t + k) % T], false, &g0, &g1)) run_chunks(g0, g1);
    }
  });
}

// The products y_m = x w_m^T of `count` matrices with the same input x (n rows of cols floats),
// quantized once when every kernel takes the same activation format, in ONE pool run over all
// their tasks. Each output is the same bits as from a product on its own (same kernel, same
// per-row order), so grouping changes nothing but the number of pool wake-ups.
void matmul_group_impl(const Matrix* const* ws, float* const* ys, const int64_t* ldys, int count, const float* x,
                       int64_t n, ThreadPool& pool, Isa isa) {
  const KernelTable& table = kernel_table(isa);
  if (count < 1 || count > kMaxGroup) throw ArgError("matmul: a group of " + std::to_string(count) + " products (1 to 4)");
  GroupPart parts[kMaxGroup];
  for (int m = 0; m < count; m++) {
    const Matrix& w = *ws[m];
    check_shape(w);
    if (ldys[m] < w.rows) throw ArgError("matmul: ldy " + std::to_string(ldys[m]) + " < rows " + std::to_string(w.rows));
    GroupPart& p = parts[m];
    p.w = &w;
    p.y = ys[m];
    p.ldy = ldys[m];
    p.k = find_kernel(table, w, &p.by_row);
  }
  if (n <= 0) return;
  bool shared = true;
  for (int m = 1; m < count; m++) shared = shared && parts[m].k.act == parts[0].k.act && ws[m]->cols == ws[0]->cols;
  if (!shared) {  // different activation formats or widths: one product at a time
    for (int m = 0; m < count; m++) matmul_group_impl(ws + m, ys + m, ldys + m, 1, x, n, pool, isa);
    return;
  }

  const int64_t cols = ws[0]->cols;
  const ActFormat fmt = parts[0].k.act;
  const uint8_t* act = (const uint8_t*)x;
  size_t stride = (size_t)cols * sizeof(float);
  if (fmt != ActFormat::f32) {
    stride = act_row_bytes(fmt, cols);
    uint8_t* q = act_scratch(stride * (size_t)n);
    const QuantizeRowFn quantize_row = table.quantize[(int)fmt];
    auto quantize = [&](int i) { quantize_row(x + (size_t)i * cols, cols, q + (size_t)i * stride); };
    if (n * cols <= 32768) {  // a few microseconds: cheaper than waking the pool for it
      for (int i = 0; i < (int)n; i++) quantize(i);
    } else {
      pool.run((int)n, quantize);
    }
    act = q;
  }

  if (n <= kStealRows && pool.participants() > 1) return matmul_stolen(parts, count, act, stride, n, pool);
  // Tasks: (product, weight-row chunk, block of up to kActBlock activation rows), chunk-major
  // within each product. Long batches (prompts) are cut so a task's activations stay in L2 next
  // to its weights; every (row, column) is still computed the same way, whichever task holds it.
  constexpr int64_t kActBlock = 64;
  const int64_t n_ablocks = (n + kActBlock - 1) / kActBlock;
  int64_t n_tasks = 0;
  for (int m = 0; m < count; m++) {
    GroupPart& p = parts[m];
    p.chunk = rows_per_task(*p.w, pool.participants(), n);
    p.n_chunks = (p.w->rows + p.chunk - 1) / p.chunk;
    p.first_task = n_tasks;
    n_tasks += p.n_chunks * n_ablocks;
  }
  pool.run((int)n_tasks, [&](int task) {
    int m = count - 1;
    while (m > 0 && task < parts[m].first_task) m--;
    const GroupPart& p = parts[m];
    const int64_t t = task - p.first_task;
    const int64_t c = t / n_ablocks, a0 = t % n_ablocks * kActBlock;
    const int64_t r0 = c * p.chunk, r1 = std::min(p.w->rows, r0 + p.chunk);
    const uint8_t* a = act + (size_t)a0 * stride;
    const int64_t rows = std::min(kActBlock, n - a0);
    if (p.by_row) {
      gemm_rows8_by_row(p.k.fn, *p.w, r0, r1, a, stride, rows, p.y + a0 * p.ldy, p.ldy);
    } else {
      p.k.fn(*p.w, r0, r1, a, stride, rows, p.y + a0 * p.ldy, p.ldy);
    }
  });
}

void matmul_impl(const Matrix& w, const float* x, int64_t n, float* y, int64_t ldy, ThreadPool& pool, Isa isa) {
  const Matrix* ws[1] = {&w};
  float* ys[1] = {y};
  const int64_t ldys[1] = {ldy};
  matmul_group_impl(ws, ys, ldys, 1, x, n, pool, isa);
}

}  // namespace

void matmul(const Matrix& w, const float* x, int64_t n, float* y, ThreadPool& pool, Isa isa) {
  matmul_impl(w, x, n, y, w.rows, pool, isa);
}

void matmul(const Matrix& w, const float* x, int64_t n, float* y, int64_t ldy, ThreadPool& pool) {
  matmul_impl(w, x, n, y, ldy, pool, active_isa());
}

void matmul(const Matrix& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  matmul(w, x, n, y, pool, active_isa());
}

void matmul_group(const Matrix* const* ws, float* const* ys, int count, const float* x, int64_t n, ThreadPool& pool) {
  int64_t ldys[4] = {0, 0, 0, 0};
  for (int m = 0; m < count && m < 4; m++) ldys[m] = ws[m]->rows;
  matmul_group_impl(ws, ys, ldys, count, x, n, pool, active_isa());
}

}  // namespace qd::cpu
