// Which elements dtplan-run's dropout keeps. A mask is a function of where it is drawn, not of
// a generator's state, so that a sample draws the same masks on any number of ranks (samples
// are numbered globally, as make_batch numbers them), recomputation redraws the masks forward
// drew, and tools/torch_replay.py rebuilds them with numpy:
//   sample key  k = mix(mix(seed ^ step) + sample)            (make_batch's key)
//   stream      s = mix(k + ((4 layer + site + 1) << 32))     (token ids use k + position)
//   element i of the sample's tensor is kept when  mix(s + i) >> 40  >=  round(p 2^24)
// with mix the splitmix64 finaliser: kept with probability 1 - p, to 2^-24. A sample's tensor
// is seq x hidden at the hidden sites and heads x seq x seq at the attention probabilities,
// whose entries above the diagonal (probabilities that are zero) are dropped without a draw.
// Kept elements are scaled by 1 / (1 - p), as torch.nn.Dropout scales them.
//
// Header-only and usable in CUDA device code. The functions are static: every translation
// unit keeps its own copy, so the per-instruction-set builds of the CPU kernels
// (cpu_kernels_isa.cpp) never share one through the linker.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define DTPLAN_HOST_DEVICE __host__ __device__
#else
#define DTPLAN_HOST_DEVICE
#endif

namespace dtplan::runtime {

enum class DropoutSite : std::uint64_t {
  embedding = 0,         // layer 0: the embeddings after positions are added
  attention = 1,         // the attention probabilities
  attention_output = 2,  // the attention output projection
  mlp_output = 3,        // the MLP down projection
};

DTPLAN_HOST_DEVICE static inline std::uint64_t dropout_mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

DTPLAN_HOST_DEVICE static inline std::uint64_t dropout_stream(std::uint64_t seed, std::int64_t step,
                                                              std::int64_t sample,
                                                              std::int64_t layer,
                                                              DropoutSite site) {
  const std::uint64_t key = dropout_mix(dropout_mix(seed ^ static_cast<std::uint64_t>(step)) +
                                        static_cast<std::uint64_t>(sample));
  const std::uint64_t stream =
      4 * static_cast<std::uint64_t>(layer) + static_cast<std::uint64_t>(site) + 1;
  return dropout_mix(key + (stream << 32));
}

DTPLAN_HOST_DEVICE static inline bool dropout_keep(std::uint64_t stream, std::uint64_t element,
                                                   std::uint32_t threshold) {
  return (dropout_mix(stream + element) >> 40) >= threshold;
}

// What a kept element is multiplied by, in fp32 as PyTorch computes it: 1 / (1 - p).
inline float dropout_scale(double p) {
  return 1.0f / static_cast<float>(1.0 - p);
}

// One mask to draw: `samples` consecutive samples from `first_sample`, `per_sample` elements
// each (causal_seq > 0: heads x seq x seq squares, entries above the diagonal dropped).
struct DropoutDraw {
  std::uint64_t seed = 0;
  std::int64_t step = 0, first_sample = 0, samples = 0;
  std::int64_t layer = 0;
  DropoutSite site = DropoutSite::embedding;
  std::int64_t per_sample = 0;
  std::int64_t causal_seq = 0;
  // Where the drawn elements start within each sample's stream: a tensor-parallel rank draws
  // only its heads' squares of the attention probabilities (first head x seq x seq).
  std::int64_t element_offset = 0;
  double p = 0;

  std::int64_t elements() const { return samples * per_sample; }
  std::uint32_t threshold() const {
    return static_cast<std::uint32_t>(std::llround(p * 16777216.0));
  }
  float scale() const { return dropout_scale(p); }
};

}  // namespace dtplan::runtime
