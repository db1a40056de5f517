#include "core/stream_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace hoop {

void copy_streaming(void* dst, const void* src, std::size_t bytes) {
#if defined(__SSE2__)
  auto* out = static_cast<unsigned char*>(dst);
  const auto* in = static_cast<const unsigned char*>(src);
  // Up to the first 16-byte boundary of the destination by memcpy, which the streaming stores
  // need; the tail too.
  const std::size_t head =
      std::min(bytes, (16 - (reinterpret_cast<std::uintptr_t>(out) & 15)) & std::size_t{15});
  std::memcpy(out, in, head);
  std::size_t done = head;
  for (; bytes - done >= 64; done += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + done), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + done + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + done + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + done + 48), d);
  }
  std::memcpy(out + done, in + done, bytes - done);
  // Streaming stores are weakly ordered: fence them before the caller publishes.
  _mm_sfence();
#else
  std::memcpy(dst, src, bytes);
#endif
}

}  // namespace hoop
