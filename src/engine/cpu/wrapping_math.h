// Integer sums and products that wrap (through unsigned) on overflow, as the kernels want for
// hostile inputs, instead of being undefined behaviour; floats are the plain operations.
#pragma once

#include <type_traits>

namespace tessera::engine::cpu {

template <typename T>
T WrappingAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename T>
T WrappingMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

}  // namespace tessera::engine::cpu
