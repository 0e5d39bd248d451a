// Test helpers shared by the ModelQueue tests: a request whose one input is a single float, and
// the promise its answer lands in.
#pragma once

#include <cstring>
#include <future>
#include <memory>

#include "tessera/common/clock.h"
#include "tessera/dispatch/request.h"

namespace tessera::dispatch {

struct Submitted {
  float value = 0;
  std::promise<StatusOr<Response>> promise;
};

// Arrives now unless `arrival_ns` is given; `s` must outlive the answer.
inline std::unique_ptr<Request> MakeRequest(Submitted& s, uint64_t arrival_ns = 0) {
  auto request = std::make_unique<Request>();
  request->inputs.push_back(TensorView{"x", DataType::kFp32, {1, 1}, &s.value, 4});
  request->arrival_ns = arrival_ns ? arrival_ns : MonotonicNs();
  request->done = [&s](StatusOr<Response> r) { s.promise.set_value(std::move(r)); };
  return request;
}

// The first float of the first output (the fake runners echo the input there).
inline float FirstFloat(const Response& response) {
  float v;
  std::memcpy(&v, response.outputs.at(0).bytes.data(), 4);
  return v;
}

}  // namespace tessera::dispatch
