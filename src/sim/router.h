// Smooth weighted round robin (the nginx algorithm): spreads one model's requests over its
// gpulets in proportion to each gpulet's planned rate_rps, deterministically and evenly
// interleaved (weights 2:1 give A B A A B A ..., never long runs). Stands in for the gpulet
// artifact's WRR load balancer (seed 001 §1.4 [R load_balancer.cpp]).
//
// Thread-compatible.
#pragma once

#include <cstddef>
#include <vector>

namespace tessera::sim {

class WeightedRoundRobin {
 public:
  WeightedRoundRobin() = default;
  // Non-positive weights count as 0; if all are 0, every target gets weight 1.
  explicit WeightedRoundRobin(std::vector<double> weights) : weights_(std::move(weights)) {
    double total = 0;
    for (double& w : weights_) {
      if (!(w > 0)) w = 0;
      total += w;
    }
    if (total <= 0) {
      for (double& w : weights_) w = 1;
    }
    current_.assign(weights_.size(), 0);
  }

  bool empty() const { return weights_.empty(); }
  size_t size() const { return weights_.size(); }

  // Index of the next target. Each pick adds every weight to its target's credit, takes the
  // target with the most credit (lowest index on ties) and charges it the weights' sum.
  size_t Pick() {
    double total = 0;
    size_t best = 0;
    for (size_t i = 0; i < weights_.size(); ++i) {
      current_[i] += weights_[i];
      total += weights_[i];
      if (current_[i] > current_[best]) best = i;
    }
    current_[best] -= total;
    return best;
  }

 private:
  std::vector<double> weights_;
  std::vector<double> current_;
};

}  // namespace tessera::sim
