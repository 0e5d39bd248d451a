// The simulator's event queue: a min-heap on (time, insertion sequence).
//
// Ties in time run in the order the events were pushed, which makes a run deterministic no matter
// how the heap breaks ties internally. Cancellation is by generation: an event carries the
// generation of what it refers to, and the handler ignores it when that has moved on.
//
// Thread-compatible.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

namespace tessera::sim {

enum class EventType {
  kArrival,      // a: model index
  kRoundTimer,   // a: gpulet index; gen: the gpulet's timer generation
  kBatchFinish,  // a: batch id; gen: the batch's finish generation
  kEpoch,        // re-planning decision
  kPlanSwitch,   // gen: the pending plan's number
};

struct Event {
  double time_ms = 0;
  uint64_t seq = 0;
  EventType type = EventType::kArrival;
  int64_t a = 0;
  uint64_t gen = 0;
};

class EventQueue {
 public:
  void Push(double time_ms, EventType type, int64_t a = 0, uint64_t gen = 0) {
    heap_.push(Event{time_ms, next_seq_++, type, a, gen});
  }
  bool empty() const { return heap_.empty(); }
  const Event& top() const { return heap_.top(); }
  Event Pop() {
    Event event = heap_.top();
    heap_.pop();
    return event;
  }

 private:
  struct Later {
    bool operator()(const Event& x, const Event& y) const {
      if (x.time_ms != y.time_ms) return x.time_ms > y.time_ms;
      return x.seq > y.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace tessera::sim
