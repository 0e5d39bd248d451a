// Seeded random numbers that are identical on every standard library.
//
// std::mt19937_64 is fully specified by the standard, but the distributions
// (std::exponential_distribution, std::normal_distribution, ...) are not, so their outputs differ
// between libstdc++ and libc++. Everything the simulator draws goes through the transforms here.
//
// Thread-compatible: one Rng per stream, used by one thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace tessera::sim {

// SplitMix64 finaliser: spreads (seed, stream) into well-separated mt19937_64 seeds, so streams of
// nearby seeds are not correlated.
inline uint64_t MixSeed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream) : engine_(MixSeed(seed, stream)) {}

  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  // Exponential with the given mean, by inverse transform: −mean·ln(1 − U), 1 − U ∈ (0, 1].
  double Exponential(double mean) { return -mean * std::log1p(-Uniform()); }

  // Standard normal by Box–Muller (one value per call; the pair's second half is dropped so the
  // stream position does not depend on call history).
  double Normal() {
    const double u1 = 1.0 - Uniform();  // (0, 1], so the log is finite
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace tessera::sim
