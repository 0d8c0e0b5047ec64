// The byte buffer the chunk codecs write into (chunk_codec.h, run_deflate.h), below both.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace aon::chunk_codec {

// Bytes that resize() leaves as they are instead of zero-filling: for buffers
// written in full after they grow, such as a compressor's output, sized to its
// bound for every chunk (zeroing a chunk's worth each time showed in profiles).
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  using std::allocator<T>::allocator;
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};
using ChunkBuffer = std::vector<uint8_t, UninitializedAllocator<uint8_t>>;

}  // namespace aon::chunk_codec
