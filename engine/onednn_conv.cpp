// Convolutions on oneDNN's primitives (engine/conv.h), sharing the matrix
// engine's CPU engine, per-thread streams, scratchpads and cache mechanism
// (engine/detail/onednn.h). In the blocked layout each primitive chooses its
// tensors' formats; an argument whose format differs from the caller's NCHW
// is reordered into (or, for a result, out of) a buffer in the thread's
// scratchpad, after the primitive's own scratch space.
#include <oneapi/dnnl/dnnl.hpp>

#include <atomic>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/blas.h"
#include "engine/conv.h"
#include "engine/detail/onednn.h"

namespace xg::engine {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using dims = dnnl::memory::dims;
using onednn::cpu;

enum class Kind { forward, backward_data, backward_weights };

struct Key {
  Kind kind;
  dt in;
  bool bias;
  ConvLayout layout;
  ConvGeometry g;
  ConvBlocks user;  // the caller's layouts of the arguments this kind reads and writes (others 0)
};

// One argument of a primitive: `user` over the caller's NCHW pointer,
// `inner` in the primitive's format (the same memory when they agree).
struct Slot {
  int arg = 0;           // DNNL_ARG_SRC, ...
  bool output = false;  // written by the primitive
  dnnl::memory user, inner;
  bool reordered = false;
  dnnl::reorder reorder;  // user -> inner for an input, inner -> user for an output
  size_t offset = 0;      // of inner in the scratchpad, when reordered
};

struct Entry {
  dnnl::primitive prim;
  std::vector<Slot> slots;
  dnnl::memory scratch;
  size_t total = 0;  // the primitive's scratch space and the reordered buffers
  std::string kernel;  // oneDNN's name of the implementation
};

std::atomic<ConvLayout> g_layout{ConvLayout::automatic};
std::atomic<bool> g_blocked_activations{true};

// NCHW, or nChw{b}c for a block b.
tag activation_tag(int block) {
  if (block == 0) return tag::nchw;
  if (block == 8) return tag::nChw8c;
  if (block == 16) return tag::nChw16c;
  throw std::invalid_argument(fmt::format("convolution: activation block {}: expected 0 (NCHW), 8 or 16", block));
}

// The block b where desc is nChw{b}c of dims (in its own data type), else 0.
int block_of(const dnnl::memory::desc& desc, const dims& d) {
  for (int b : {8, 16})
    if (d[1] % b == 0 && desc == dnnl::memory::desc(d, desc.data_type(), activation_tag(b))) return b;
  return 0;
}

// The memory descriptors as the caller stores them (NCHW, (O,C/G,kh,kw)),
// or format "any" for the primitive to choose.
struct Descs {
  dnnl::memory::desc x, w, b, y;
};

// x and y in blocks xb and yb (0: NCHW) unless any.
Descs user_descs(const ConvGeometry& g, dt tx, dt tw, dt ty, bool any, int xb = 0, int yb = 0) {
  const dims xd{g.n, g.c, g.h, g.w}, yd{g.n, g.o, g.ho, g.wo};
  const dims wd = g.groups == 1 ? dims{g.o, g.c, g.kh, g.kw} : dims{g.groups, g.o / g.groups, g.c / g.groups, g.kh, g.kw};
  const tag wt = any ? tag::any : (g.groups == 1 ? tag::oihw : tag::goihw);
  const tag xt = any ? tag::any : activation_tag(xb), yt = any ? tag::any : activation_tag(yb);
  return {dnnl::memory::desc(xd, tx, xt), dnnl::memory::desc(wd, tw, wt), dnnl::memory::desc(dims{g.o}, dt::f32, tag::x),
          dnnl::memory::desc(yd, ty, yt)};
}

// Winograd (oneDNN's F(4x4, 3x3), "auto" lets oneDNN decide) for float32
// 3x3 stride-1 undilated ungrouped convolutions of at least 16 input
// channels, where it beat the direct kernels on a training step (28x28
// images, 32 and 64 channels). With one input channel oneDNN still picks it,
// and there it ran slower than direct. The figures are in
// docs/performance.md, section Convolutions.
dnnl::algorithm algorithm_for(const Key& k) {
  const ConvGeometry& g = k.g;
  const bool wino = k.in == dt::f32 && k.layout == ConvLayout::blocked && g.groups == 1 && g.c >= 16 && g.kh == 3 &&
                    g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1;
  return wino ? dnnl::algorithm::convolution_auto : dnnl::algorithm::convolution_direct;
}

// The forward descriptor: also the hint the backward primitives need.
dnnl::convolution_forward::primitive_desc forward_pd(const Key& k, const dnnl::primitive_attr& attr) {
  const ConvGeometry& g = k.g;
  const Descs d = user_descs(g, k.in, k.in, dt::f32, k.layout == ConvLayout::blocked);
  const dims s{g.sh, g.sw}, dil{g.dh - 1, g.dw - 1}, pl{g.pt, g.pl}, pr{g.pb, g.pr};
  using cf = dnnl::convolution_forward;
  const auto desc = k.bias ? cf::desc(dnnl::prop_kind::forward_training, algorithm_for(k), d.x, d.w,
                                      d.b, d.y, s, dil, pl, pr)
                           : cf::desc(dnnl::prop_kind::forward_training, algorithm_for(k), d.x, d.w,
                                      d.y, s, dil, pl, pr);
  return cf::primitive_desc(desc, attr, cpu());
}

// A slot for argument `arg`: the caller's plain layout against the one the
// primitive chose, with the reorder between them when they differ.
Slot slot(int arg, bool output, const dnnl::memory::desc& user, const dnnl::memory::desc& inner, size_t& offset) {
  Slot s;
  s.arg = arg;
  s.output = output;
  s.user = dnnl::memory(user, cpu(), DNNL_MEMORY_NONE);
  if (user == inner) {
    s.inner = s.user;
    return s;
  }
  s.reordered = true;
  s.inner = dnnl::memory(inner, cpu(), DNNL_MEMORY_NONE);
  s.offset = offset;
  offset += (inner.get_size() + 63) / 64 * 64;  // each buffer on its own cache line
  s.reorder = output ? dnnl::reorder(s.inner, s.user) : dnnl::reorder(s.user, s.inner);
  return s;
}

// The primitive of one key and its argument slots, in the order the run
// functions pass their pointers.
template <class Pd>
Entry finish(const Pd& pd, dnnl::primitive prim, const std::vector<std::pair<int, dnnl::memory::desc>>& args,
             const std::vector<dnnl::memory::desc>& user) {
  Entry e;
  e.prim = std::move(prim);
  e.kernel = pd.impl_info_str();
  e.scratch = dnnl::memory(pd.scratchpad_desc(), cpu(), DNNL_MEMORY_NONE);
  size_t offset = (pd.scratchpad_desc().get_size() + 63) / 64 * 64;
  for (size_t i = 0; i < args.size(); ++i) {
    const int a = args[i].first;
    const bool output = a == DNNL_ARG_DST || a == DNNL_ARG_DIFF_SRC || a == DNNL_ARG_DIFF_WEIGHTS ||
                        a == DNNL_ARG_DIFF_BIAS;
    e.slots.push_back(slot(a, output, user[i], args[i].second, offset));
  }
  e.total = offset;
  return e;
}

Entry make_entry(const Key& k) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const ConvGeometry& g = k.g;
  const dims s{g.sh, g.sw}, dil{g.dh - 1, g.dw - 1}, pl{g.pt, g.pl}, pr{g.pb, g.pr};
  const auto fwd = forward_pd(k, attr);
  if (k.kind == Kind::forward) {
    const Descs u = user_descs(g, k.in, k.in, dt::f32, false, k.user.x, k.user.y);
    std::vector<std::pair<int, dnnl::memory::desc>> args{
        {DNNL_ARG_SRC, fwd.src_desc()}, {DNNL_ARG_WEIGHTS, fwd.weights_desc()}, {DNNL_ARG_DST, fwd.dst_desc()}};
    std::vector<dnnl::memory::desc> user{u.x, u.w, u.y};
    if (k.bias) args.push_back({DNNL_ARG_BIAS, fwd.bias_desc()}), user.push_back(u.b);
    return finish(fwd, dnnl::convolution_forward(fwd), args, user);
  }
  const bool any = k.layout == ConvLayout::blocked;
  if (k.kind == Kind::backward_data) {
    const Descs d = user_descs(g, dt::f32, k.in, k.in, any),
                u = user_descs(g, dt::f32, k.in, k.in, false, k.user.dx, k.user.y);
    using cb = dnnl::convolution_backward_data;
    const cb::primitive_desc pd(cb::desc(algorithm_for(k), d.x, d.w, d.y, s, dil, pl, pr), attr,
                                cpu(), fwd);
    return finish(pd, cb(pd),
                  {{DNNL_ARG_DIFF_DST, pd.diff_dst_desc()}, {DNNL_ARG_WEIGHTS, pd.weights_desc()},
                   {DNNL_ARG_DIFF_SRC, pd.diff_src_desc()}},
                  {u.y, u.w, u.x});
  }
  const Descs d = user_descs(g, k.in, dt::f32, k.in, any),
              u = user_descs(g, k.in, dt::f32, k.in, false, k.user.x, k.user.y);
  using cw = dnnl::convolution_backward_weights;
  const auto make_pd = [&](dnnl::algorithm alg) {
    const auto desc = k.bias ? cw::desc(alg, d.x, d.w, d.b, d.y, s, dil, pl, pr)
                             : cw::desc(alg, d.x, d.w, d.y, s, dil, pl, pr);
    return cw::primitive_desc(desc, attr, cpu(), fwd);
  };
  // For the weight gradient "auto" never picks Winograd, though it is the
  // faster kernel wherever oneDNN's own test picks Winograd for the forward
  // (large enough batches and images). There it is asked for by name; where
  // oneDNN has no Winograd kernel for the shape, the direct one serves.
  cw::primitive_desc pd;
  if (std::strstr(fwd.impl_info_str(), "wino") != nullptr) {
    try {
      pd = make_pd(dnnl::algorithm::convolution_winograd);
    } catch (const dnnl::error&) {
      pd = make_pd(dnnl::algorithm::convolution_direct);
    }
  } else {
    pd = make_pd(algorithm_for(k));
  }
  std::vector<std::pair<int, dnnl::memory::desc>> args{
      {DNNL_ARG_SRC, pd.src_desc()}, {DNNL_ARG_DIFF_DST, pd.diff_dst_desc()},
      {DNNL_ARG_DIFF_WEIGHTS, pd.diff_weights_desc()}};
  std::vector<dnnl::memory::desc> user{u.x, u.y, u.w};
  if (k.bias) args.push_back({DNNL_ARG_DIFF_BIAS, pd.diff_bias_desc()}), user.push_back(u.b);
  return finish(pd, cw(pd), args, user);
}

onednn::Cache<Key, Entry>& cache() {
  thread_local onednn::Cache<Key, Entry> c;
  return c;
}

const char* kind_name(Kind k) {
  return k == Kind::forward ? "forward" : k == Kind::backward_data ? "backward-data" : "backward-weights";
}

Entry& entry(const Key& k) {
  try {
    return cache().get(k, make_entry);
  } catch (const dnnl::error& e) {
    const ConvGeometry& g = k.g;
    throw std::runtime_error(fmt::format(
        "oneDNN convolution {} ({}): no implementation for input ({},{},{},{}), weight ({},{},{},{}), groups {}, "
        "stride ({},{}), dilation ({},{}): {}",
        kind_name(k.kind), k.in == dt::bf16 ? "bf16" : "f32", g.n, g.c, g.h, g.w, g.o, g.c / g.groups, g.kh, g.kw,
        g.groups, g.sh, g.sw, g.dh, g.dw, e.what()));
  }
}

// The key of a call whose arguments come in the caller's layouts `user`
// (the fields that `kind` does not use are dropped). A 1x1 kernel runs on
// NCHW in the automatic layout unless an argument arrives blocked: then the
// blocked primitive reads it as it is.
Key key_of(Kind kind, dt in, const ConvGeometry& g, bool bias, ConvBlocks user = {}) {
  Key key;
  std::memset(static_cast<void*>(&key), 0, sizeof key);  // padding included: the key is compared bytewise
  key.kind = kind;
  key.in = in;
  key.bias = bias;
  if (kind == Kind::forward) user.dx = 0;
  if (kind == Kind::backward_data) user.x = 0;
  if (kind == Kind::backward_weights) user.dx = 0;
  key.user = user;
  const bool arrives_blocked = user.x != 0 || user.y != 0 || user.dx != 0;
  const ConvLayout chosen = g_layout.load();
  key.layout = chosen != ConvLayout::automatic                  ? chosen
               : g.kh * g.kw == 1 && !arrives_blocked ? ConvLayout::plain
                                                        : ConvLayout::blocked;
  key.g = g;
  return key;
}

// Runs entry e on the caller's pointers (in its slots' order), its
// reordered buffers in the scratchpad at `base`. Slot `ready`, if any, is an
// input already reordered into `ready_inner`.
void execute(Entry& e, char* base, const std::vector<void*>& ptrs, int ready = -1, void* ready_inner = nullptr) {
  e.scratch.set_data_handle(base);
  dnnl::stream& st = onednn::thread_stream();
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SCRATCHPAD, e.scratch}};
  for (size_t i = 0; i < e.slots.size(); ++i) {
    Slot& s = e.slots[i];
    s.user.set_data_handle(ptrs[i]);
    if (static_cast<int>(i) == ready) {
      s.inner.set_data_handle(ready_inner);
    } else {
      if (s.reordered) s.inner.set_data_handle(base + s.offset);
      if (s.reordered && !s.output) s.reorder.execute(st, s.user, s.inner);
    }
    args[s.arg] = s.inner;
  }
  e.prim.execute(st, args);
  for (Slot& s : e.slots)
    if (s.reordered && s.output) s.reorder.execute(st, s.inner, s.user);
}

// Runs the primitive of (kind, in, g) on the caller's pointers, given in its
// slots' order; a null pointer (no bias) drops the bias from the key.
void run(Kind kind, dt in, const ConvGeometry& g, std::vector<void*> ptrs, ConvBlocks user = {}) {
  const bool bias = ptrs.size() == 4 && ptrs[3] != nullptr;
  if (!bias && ptrs.size() == 4) ptrs.pop_back();
  onednn::OneOmpThread one;
  Entry& e = entry(key_of(kind, in, g, bias, user));
  execute(e, onednn::thread_scratchpad(e.total), ptrs);
}

// Both backward primitives on one dy: when both read it in the same inner
// format, it is reordered once into a buffer past both primitives' own
// scratch space, and each runs on that copy.
void run_backward(dt in, const ConvGeometry& g, void* x, void* w, void* dy, float* dx, float* dw, float* db,
                  ConvBlocks user = {}) {
  std::vector<void*> wptrs{x, dy, dw};
  if (db) wptrs.push_back(db);
  onednn::OneOmpThread one;
  const Key kw = key_of(Kind::backward_weights, in, g, db != nullptr, user),
            kd = key_of(Kind::backward_data, in, g, false, user);
  // Fetched again after the second: a full cache empties itself on an insertion.
  entry(kw);
  Entry& ed = entry(kd);
  Entry& ew = entry(kw);
  Slot &sd = ed.slots[0], &sw = ew.slots[1];  // their DIFF_DST slots
  if (!sd.reordered || !sw.reordered || sd.inner.get_desc() != sw.inner.get_desc()) {
    execute(ed, onednn::thread_scratchpad(ed.total), {dy, w, dx});
    execute(ew, onednn::thread_scratchpad(ew.total), wptrs);
    return;
  }
  const size_t own = std::max(ed.total, ew.total);
  char* base = onednn::thread_scratchpad(own + sd.inner.get_desc().get_size());
  sd.user.set_data_handle(dy);
  sd.inner.set_data_handle(base + own);
  sd.reorder.execute(onednn::thread_stream(), sd.user, sd.inner);
  execute(ed, base, {dy, w, dx}, 0, base + own);
  execute(ew, base, wptrs, 1, base + own);
}

int64_t weight_numel(const ConvGeometry& g) { return g.o * (g.c / g.groups) * g.kh * g.kw; }

void zero_weight_grads(const ConvGeometry& g, float* dw, float* db) {
  std::memset(dw, 0, sizeof(float) * static_cast<size_t>(weight_numel(g)));
  if (db) std::memset(db, 0, sizeof(float) * static_cast<size_t>(g.o));
}

bool widened_route() { return bf16_route() == Bf16Route::widened; }

void check_bf16() {
  if (const std::string why = bf16_refusal(); !why.empty()) throw std::runtime_error(why);
}

}  // namespace

namespace onednn {
size_t conv_cached() { return cache().size(); }
}  // namespace onednn

bool conv_available() { return true; }

ConvKernels conv_kernels(const ConvGeometry& g) {
  onednn::OneOmpThread one;
  ConvKernels k;
  k.forward = entry(key_of(Kind::forward, dt::f32, g, true)).kernel;
  k.backward_data = entry(key_of(Kind::backward_data, dt::f32, g, false)).kernel;
  k.backward_weights = entry(key_of(Kind::backward_weights, dt::f32, g, true)).kernel;
  return k;
}

void set_conv_layout(ConvLayout layout) { g_layout.store(layout); }
ConvLayout conv_layout() { return g_layout.load(); }

void set_blocked_activations(bool on) { g_blocked_activations.store(on); }
bool blocked_activations() { return g_blocked_activations.load(); }

ConvBlocks conv_blocks(const ConvGeometry& g, int x_block, bool bf16_inputs) {
  activation_tag(x_block);  // checks it
  onednn::OneOmpThread one;
  // bf16 on the widened route runs the float32 primitives.
  const dt in = bf16_inputs && !widened_route() ? dt::bf16 : dt::f32;
  const dims xd{g.n, g.c, g.h, g.w}, yd{g.n, g.o, g.ho, g.wo};
  // Slot 0 of the forward is its source, slot 2 its destination; slot 2 of
  // the data gradient is dx (asked for in x's layout, which makes a 1x1
  // kernel blocked too when x is).
  // (One entry at a time: a full cache empties itself on an insertion.)
  ConvBlocks b;
  const Entry& f = entry(key_of(Kind::forward, in, g, false, {x_block, 0, 0}));
  b.x = block_of(f.slots[0].inner.get_desc(), xd);
  b.y = block_of(f.slots[2].inner.get_desc(), yd);
  const Entry& d = entry(key_of(Kind::backward_data, in, g, false, {0, 0, x_block}));
  b.dx = block_of(d.slots[2].inner.get_desc(), xd);
  return b;
}

namespace {
// A reorder of n images between NCHW and nChw{block}c, on the calling thread.
void reorder_activations(bool to_plain, int block, int64_t n, int64_t c, int64_t h, int64_t w, const float* src,
                         float* dst) {
  if (n == 0) return;
  if (block == 0 || c % block != 0)
    throw std::invalid_argument(fmt::format("convolution: {} channels cannot be in blocks of {}", c, block));
  onednn::OneOmpThread one;
  const dims d{n, c, h, w};
  const dnnl::memory::desc plain(d, dt::f32, tag::nchw), blocked(d, dt::f32, activation_tag(block));
  dnnl::memory from(to_plain ? blocked : plain, cpu(), const_cast<float*>(src));
  dnnl::memory to(to_plain ? plain : blocked, cpu(), dst);
  dnnl::reorder(from, to).execute(onednn::thread_stream(), from, to);
  onednn::thread_stream().wait();
}
}  // namespace

void unblock_activations(int block, int64_t n, int64_t c, int64_t h, int64_t w, const float* src, float* dst) {
  reorder_activations(true, block, n, c, h, w, src, dst);
}
void block_activations(int block, int64_t n, int64_t c, int64_t h, int64_t w, const float* src, float* dst) {
  reorder_activations(false, block, n, c, h, w, src, dst);
}

void conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y, ConvBlocks b) {
  if (g.n == 0) return;
  run(Kind::forward, dt::f32, g, {const_cast<float*>(x), const_cast<float*>(w), y, const_cast<float*>(bias)}, b);
}

void conv_backward_data(const ConvGeometry& g, const float* dy, const float* w, float* dx, ConvBlocks b) {
  if (g.n == 0) return;
  run(Kind::backward_data, dt::f32, g, {const_cast<float*>(dy), const_cast<float*>(w), dx}, b);
}

void conv_backward_weights(const ConvGeometry& g, const float* x, const float* dy, float* dw, float* db,
                           ConvBlocks b) {
  if (g.n == 0) return zero_weight_grads(g, dw, db);
  run(Kind::backward_weights, dt::f32, g, {const_cast<float*>(x), const_cast<float*>(dy), dw, db}, b);
}

void conv_backward(const ConvGeometry& g, const float* x, const float* w, const float* dy, float* dx, float* dw,
                   float* db, ConvBlocks b) {
  if (g.n == 0) return zero_weight_grads(g, dw, db);
  run_backward(dt::f32, g, const_cast<float*>(x), const_cast<float*>(w), const_cast<float*>(dy), dx, dw, db, b);
}

void conv_forward(const ConvGeometry& g, const bf16_t* x, const bf16_t* w, const float* bias, float* y,
                  ConvBlocks b) {
  check_bf16();
  if (g.n == 0) return;
  if (widened_route())
    return conv_forward(g, blas::widened_into(0, x, g.n * g.c * g.h * g.w), blas::widened_into(1, w, weight_numel(g)),
                        bias, y, b);
  run(Kind::forward, dt::bf16, g, {const_cast<bf16_t*>(x), const_cast<bf16_t*>(w), y, const_cast<float*>(bias)}, b);
}

void conv_backward_data(const ConvGeometry& g, const bf16_t* dy, const bf16_t* w, float* dx, ConvBlocks b) {
  check_bf16();
  if (g.n == 0) return;
  if (widened_route())
    return conv_backward_data(g, blas::widened_into(0, dy, g.n * g.o * g.ho * g.wo),
                              blas::widened_into(1, w, weight_numel(g)), dx, b);
  run(Kind::backward_data, dt::bf16, g, {const_cast<bf16_t*>(dy), const_cast<bf16_t*>(w), dx}, b);
}

void conv_backward_weights(const ConvGeometry& g, const bf16_t* x, const bf16_t* dy, float* dw, float* db,
                           ConvBlocks b) {
  check_bf16();
  if (g.n == 0) return zero_weight_grads(g, dw, db);
  if (widened_route())
    return conv_backward_weights(g, blas::widened_into(0, x, g.n * g.c * g.h * g.w),
                                 blas::widened_into(1, dy, g.n * g.o * g.ho * g.wo), dw, db, b);
  run(Kind::backward_weights, dt::bf16, g, {const_cast<bf16_t*>(x), const_cast<bf16_t*>(dy), dw, db}, b);
}

void conv_backward(const ConvGeometry& g, const bf16_t* x, const bf16_t* w, const bf16_t* dy, float* dx, float* dw,
                   float* db, ConvBlocks b) {
  check_bf16();
  if (g.n == 0) return zero_weight_grads(g, dw, db);
  if (widened_route())  // each operand widened once; dy then reordered once for both halves
    return conv_backward(g, blas::widened_into(0, x, g.n * g.c * g.h * g.w), blas::widened_into(1, w, weight_numel(g)),
                         blas::widened_into(2, dy, g.n * g.o * g.ho * g.wo), dx, dw, db, b);
  run_backward(dt::bf16, g, const_cast<bf16_t*>(x), const_cast<bf16_t*>(w), const_cast<bf16_t*>(dy), dx, dw, db, b);
}

}  // namespace xg::engine
