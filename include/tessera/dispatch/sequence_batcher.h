// Triton's sequence batcher (stateful models), in front of one model version's ModelQueue.
//
// A sequence is the requests that carry one correlation ID (the `sequence_id` request parameter),
// from the one flagged START to the one flagged END. Its requests run one at a time, in arrival
// order: each is queued on the model only when the one before it has been answered, because the
// state that one leaves is this one's input. Requests of different sequences batch together in
// the model's queue, at most one per sequence in a batch (Triton's Oldest strategy).
//
// Per request the batcher adds the model's control inputs (START, END, READY, CORRID) and its
// implicit state inputs: the state the sequence's previous request produced, or zeros at START
// (Triton's "implicit state management"); a state with -1 dims takes the shape the previous
// request gave it, so only requests whose states have equal shapes share a batch (ShapeKey). The
// state outputs are taken out of the answer and kept for the sequence's next request, so the model
// itself holds no state and any instance can run any sequence. A sequence without a request for
// `idle_timeout_ns` is released.
//
// Thread-safe. Create with std::make_shared: answers in flight hold the batcher.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/common/clock.h"
#include "tessera/common/sequence_tensors.h"
#include "tessera/common/status.h"
#include "tessera/common/tensor.h"
#include "tessera/dispatch/model_queue.h"
#include "tessera/dispatch/model_stats.h"
#include "tessera/dispatch/request.h"

namespace tessera::dispatch {

// A request's sequence parameters. The ID is a number or a string (Triton takes either); 0 and ""
// mean none.
struct SequenceFlags {
  uint64_t id = 0;
  std::string id_text;  // set when the client sent the ID as a string
  bool start = false;
  bool end = false;

  bool has_id() const { return id != 0 || !id_text.empty(); }
  std::string IdString() const;  // "42" or "\"abc\"", for messages
};

struct SequenceBatcherOptions {
  std::string model_label;  // "accumulator/1", for messages
  bool batched = false;     // max_batch_size > 0: tensors get a leading batch dim of 1
  uint64_t idle_timeout_ns = 1'000'000'000;  // max_sequence_idle_microseconds (Triton: 1 s)
  std::vector<SequenceControl> controls;
  std::vector<SequenceState> states;
  // The outputs a client may ask for (the config's), returned when a request names none.
  std::vector<std::string> outputs;
};

class SequenceBatcher : public std::enable_shared_from_this<SequenceBatcher> {
 public:
  // `queue` runs the requests; `stats` counts the ones failed here. `clock` null = steady clock.
  SequenceBatcher(SequenceBatcherOptions options, std::shared_ptr<ModelQueue> queue,
                  std::shared_ptr<ModelStats> stats, const Clock* clock = nullptr);

  // Takes the request (moving from `request`) and later calls its `done` exactly once: queued on
  // the model now when its sequence is idle, else when the sequence's earlier requests have been
  // answered. On error the request stays with the caller and `done` is never called:
  // INVALID_ARGUMENT for a request without an ID, a first request without START, a batch of
  // more than one row, or a string ID for a model whose CORRID input is a number; ABORTED
  // after StopAccepting (as ModelQueue::Enqueue).
  Status Enqueue(std::unique_ptr<Request>&& request, const SequenceFlags& flags);

  // Stops taking new requests; held ones still run, in order.
  void StopAccepting();
  // Blocks until no request is held or running, or until `timeout_ms`; true when idle.
  bool WaitIdle(int64_t timeout_ms);

  // Sequences started and not yet ended or released.
  size_t active_sequences();

 private:
  struct Held {
    std::unique_ptr<Request> request;
    SequenceFlags flags;
  };
  struct Sequence {
    std::deque<Held> waiting;  // behind the running request
    bool running = false;      // one of its requests is in the model's queue
    bool live = false;         // started, and not ended or released
    // One per options_.states, the state the next request takes, and its shape (without the
    // batch dim; it may change from request to request where the state's dims hold a -1);
    // empty = the initial state.
    std::vector<std::string> state;
    std::vector<Shape> state_shapes;
    uint64_t last_request_ns = 0;
  };
  using Key = std::string;

  static Key KeyOf(const SequenceFlags& flags);
  // Starts the first waiting request of `key` (the sequence is not running). Called without the
  // lock; requests that fail before reaching the model are answered here and the next is tried.
  void LaunchNext(const Key& key);
  // What a request of the sequence needs beyond its own inputs: the control and state tensors.
  struct AddedInputs;
  std::shared_ptr<AddedInputs> MakeAddedInputs(const SequenceFlags& flags,
                                               const std::vector<std::string>& state,
                                               const std::vector<Shape>& shapes) const;
  // After a request of `key` was answered: keeps its state outputs (taking them out of
  // `result`), ends the sequence at END, and starts the next request.
  void Finished(const Key& key, const SequenceFlags& flags, StatusOr<Response>& result);
  void ReleaseIdleLocked(uint64_t now_ns);
  void Settle(size_t n);  // n requests left the batcher

  const SequenceBatcherOptions options_;
  const std::shared_ptr<ModelQueue> queue_;
  const std::shared_ptr<ModelStats> stats_;
  SteadyClock steady_clock_;
  const Clock* clock_;

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  std::map<Key, Sequence> sequences_;
  size_t in_batcher_ = 0;  // requests taken and not yet answered
  size_t live_ = 0;        // sequences with live == true
  bool accepting_ = true;
  uint64_t last_sweep_ns_ = 0;
};

}  // namespace tessera::dispatch
