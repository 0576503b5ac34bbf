// Float32 activations stored in oneDNN's blocked layout (Buffer::channel_block):
// the conversion back to row-major that every plain read goes through, and
// the helpers of the kernels that read the blocked layout as it is.
#include <mutex>
#include <string>
#include <utility>

#include "autograd/detail/impl.h"
#include "autograd/parallel.h"
#include "engine/conv.h"

namespace xg {

namespace {

// The (N,C,H,W) float32 values at src into dst, from nChw{block}c to NCHW
// (to_plain) or back, across the pool: one engine reorder per range of images.
void reorder_images(bool to_plain, int block, const Shape& s, const float* src, float* dst) {
  const int64_t C = s[1], H = s[2], W = s[3], image = C * H * W;
  parallel_for(s[0], 2 * image, [&](int64_t n0, int64_t n1) {
    const auto reorder = to_plain ? engine::unblock_activations : engine::block_activations;
    reorder(block, n1 - n0, C, H, W, src + n0 * image, dst + n0 * image);
  });
}
}  // namespace

void Buffer::unblock() {
  std::lock_guard<std::mutex> lock(layout_lock);
  const int b = channel_block.load(std::memory_order_acquire);
  if (b == 0) return;
  Block fresh = storage_alloc(static_cast<size_t>(bytes));
  try {
    reorder_images(true, b, blocked_shape, static_cast<const float*>(ptr), static_cast<float*>(fresh.ptr));
  } catch (...) {
    storage_free(fresh);
    throw;
  }
  block = fresh;
  ptr = fresh.ptr;
  blocked.reset();  // freed here, or by the last detail::StoredView still reading it
  channel_block.store(0, std::memory_order_release);
}

namespace detail {

bool avx512_loops() {
#if defined(__GNUC__) && defined(__x86_64__)
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  }();
  return yes;
#else
  return false;
#endif
}

int channel_block(const Tensor& t) {
  if (!t.defined()) return 0;
  const Buffer& buf = *t.impl()->buf;
  const int b = buf.channel_block.load(std::memory_order_acquire);
  return b != 0 && t.shape() == buf.blocked_shape ? b : 0;
}

Tensor make_blocked(const Shape& s, int block) {
  if (s.size() != 4 || (block != 8 && block != 16) || s[1] % block != 0)
    throw std::logic_error("make_blocked: shape " + shape_str(s) + " cannot be stored in channel blocks of " +
                           std::to_string(block));
  Tensor t = make_tensor(s, f32);
  Buffer& buf = *t.impl()->buf;
  buf.blocked_shape = s;
  const Block b = std::exchange(buf.block, Block{});  // empty first: the deleter frees b even if this throws
  buf.blocked = std::shared_ptr<void>(b.ptr, [b](void*) { storage_free(b); });
  buf.channel_block.store(block, std::memory_order_release);
  return t;
}

StoredView stored_view(const Tensor& t) {
  if (!t.defined()) return {};
  Buffer& buf = *t.impl()->buf;
  if (buf.channel_block.load(std::memory_order_acquire) != 0 && t.shape() == buf.blocked_shape) {
    // Under unblock's lock: the layout, the pointer and the storage it
    // points into change together there.
    std::lock_guard<std::mutex> lock(buf.layout_lock);
    const int b = buf.channel_block.load(std::memory_order_relaxed);
    if (b != 0) return {static_cast<float*>(buf.ptr), b, buf.blocked};
  }
  if (t.dtype() != f32) return {};
  return {const_cast<Tensor&>(t).data<float>(), 0, nullptr};
}

Tensor blocked_copy(const Tensor& t, int block) {
  Tensor out = make_blocked(t.shape(), block);
  reorder_images(false, block, t.shape(), t.data<float>(), stored_view(out).p);
  return out;
}

StoredView stored_in_block(const Tensor& t, int block, Tensor& copy) {
  StoredView v = stored_view(t);
  if (v.block == block) return v;
  v = {};  // t's storage in another block need not outlive the copy's making
  copy = blocked_copy(t, block);
  return stored_view(copy);
}

}  // namespace detail
}  // namespace xg
