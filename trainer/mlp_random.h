// The built-in trainer's random numbers. Every draw comes from a generator seeded by
// derive_seed(seed, stream, index), never from a generator that runs on across epochs, so
// the complete random state of a run is its seed and its epoch: a resumed run re-derives
// exactly the numbers an uninterrupted one would draw. Written out (not <random>'s
// distributions) because those are implementation-defined and would make datasets differ
// between standard libraries.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace cairn {

// Independent purposes get independent streams, so adding a draw to one (say, weight
// initialisation) never shifts another (the data).
enum class MlpStream : uint64_t {
  kWeightInit = 1,
  kDataGeneration = 2,
  kSplit = 3,
  kShuffle = 4,
  kTeacher = 5,
};

// SplitMix64 (Steele, Lea, Flood 2014): a bijective mixer, used to spread seeds.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint64_t derive_seed(uint64_t seed, MlpStream stream, uint64_t index = 0) {
  uint64_t state = seed;
  uint64_t mixed = splitmix64(state) ^ static_cast<uint64_t>(stream) * 0xd1b54a32d192ed03ULL;
  state = mixed;
  mixed = splitmix64(state) ^ index * 0xaef17502108ef2d9ULL;
  state = mixed;
  return splitmix64(state);
}

// xoshiro256** (Blackman, Vigna 2018): fast, small state, well tested.
class MlpRng {
 public:
  explicit MlpRng(uint64_t seed) {
    for (auto& word : state_) word = splitmix64(seed);
  }

  uint64_t next() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n), without modulo bias. REQUIRES: n > 0.
  uint64_t below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;
    for (;;) {
      const uint64_t r = next();
      if (r >= threshold) return r % n;
    }
  }

  // Standard normal (Box–Muller; the second value is dropped to keep the state simple).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

}  // namespace cairn
