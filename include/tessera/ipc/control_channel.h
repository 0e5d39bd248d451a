// Framed tessera.ipc.ControlMessage exchange over a connected Unix-domain stream socket
// (docs/executor-protocol.md). Frame = 4-byte little-endian payload length + serialized message.
//
// Thread-safety: Send() may be called from any number of threads (frames never interleave);
// Receive() from one reader thread at a time; Shutdown() from any thread, at any time.
// Ownership: the channel owns its socket and closes it on destruction.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "tessera/common/status.h"
#include "tessera/common/unique_fd.h"
#include "tessera/executor.pb.h"

namespace tessera::ipc {

// Largest payload either side sends or accepts. A length prefix above it means a corrupt or hostile
// stream; it is rejected before anything is allocated.
inline constexpr uint32_t kMaxControlFrameBytes = 64u << 20;

class ControlChannel {
 public:
  // Connects to a ControlListener bound at `socket_path`.
  static StatusOr<std::unique_ptr<ControlChannel>> Connect(
      const std::string& socket_path, uint32_t max_frame_bytes = kMaxControlFrameBytes);

  // Wraps an already-connected stream socket; takes ownership of `fd` (closed even on error).
  static StatusOr<std::unique_ptr<ControlChannel>> FromFd(
      int fd, uint32_t max_frame_bytes = kMaxControlFrameBytes);

  // Two connected channels (socketpair), for in-process use and tests.
  static StatusOr<std::pair<std::unique_ptr<ControlChannel>, std::unique_ptr<ControlChannel>>>
  CreatePair();

  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // Writes one whole frame, blocking until the kernel took it. UNAVAILABLE if the peer is gone or
  // the channel was shut down; never raises SIGPIPE.
  Status Send(const ControlMessage& message) ABSL_LOCKS_EXCLUDED(send_mu_);

  // Writes several whole frames with one system call where the kernel takes them at once, so a
  // burst wakes the peer once instead of once per message. Frames are contiguous: a concurrent
  // Send never lands between them. Same errors as Send; nothing is sent when one is too large.
  Status SendAll(const std::vector<ControlMessage>& messages) ABSL_LOCKS_EXCLUDED(send_mu_);

  // Send, with one open file descriptor passed along (SCM_RIGHTS): the peer gets its own
  // descriptor of the same open file and takes it with TakeReceivedFd() after receiving `message`.
  // The message itself must say that it carries one (the protocol's fields do).
  Status SendWithFd(const ControlMessage& message, int fd) ABSL_LOCKS_EXCLUDED(send_mu_);

  // Blocks until one whole frame arrived and parses it into `message`. Reads ahead: one recv(2)
  // takes every frame the peer has written so far, and later calls are served from that buffer.
  // Receive is for one thread at a time.
  // UNAVAILABLE ("peer closed") on orderly EOF, connection reset or after Shutdown();
  // RESOURCE_EXHAUSTED for a frame above max_frame_bytes; DATA_LOSS for an unparsable payload.
  // After any error the stream position is undefined: the caller must stop using the channel.
  Status Receive(ControlMessage* message);

  // Makes a blocked or future Receive/Send return UNAVAILABLE (shutdown(2) of both directions; the
  // peer sees EOF). The descriptor itself stays open until destruction. Idempotent.
  void Shutdown();

  // The oldest descriptor that arrived with the frames received so far (SendWithFd), or an invalid
  // UniqueFd when none did. Descriptors arrive no later than the frame they were sent with, and in
  // order, so a reader takes one for each message that says it carries one. Receive thread only;
  // descriptors never taken are closed with the channel.
  UniqueFd TakeReceivedFd();

  // True when a whole frame is already buffered, so the next Receive returns without blocking.
  // Lets a reader finish the burst it has before doing per-burst work (such as one reply for all).
  bool HasBufferedFrame() const;

  // The socket, for poll()-style integration and for tests that forge raw frames.
  int fd() const { return fd_; }

 private:
  ControlChannel(int fd, uint32_t max_frame_bytes) : fd_(fd), max_frame_bytes_(max_frame_bytes) {}

  const int fd_;
  const uint32_t max_frame_bytes_;
  std::atomic<bool> shut_down_{false};
  absl::Mutex send_mu_;  // serialises whole frames on the socket
  // Read-ahead buffer: bytes [read_pos_, read_end_) arrived but are not parsed yet.
  std::string read_buffer_;
  size_t read_pos_ = 0;
  size_t read_end_ = 0;

  // Descriptors received with SCM_RIGHTS and not taken yet, oldest first.
  std::deque<UniqueFd> received_fds_;

  // `fd` >= 0 goes along with the first byte of `frames`.
  Status SendFrames(const std::string& frames, int fd = -1) ABSL_LOCKS_EXCLUDED(send_mu_);
  // Makes at least `size` unparsed bytes available, reading as much as the socket has.
  Status Fill(size_t size);
};

// A bound, listening Unix-domain socket that accepts ControlChannels.
// Thread-safety: Accept() from one thread at a time. The socket file is unlinked on destruction.
class ControlListener {
 public:
  // Binds `socket_path` (at most 107 bytes). A stale socket file left at the path (a crashed
  // server) is removed first; any other kind of file there is an error.
  static StatusOr<std::unique_ptr<ControlListener>> Listen(const std::string& socket_path);

  ~ControlListener();
  ControlListener(const ControlListener&) = delete;
  ControlListener& operator=(const ControlListener&) = delete;

  // Waits up to `timeout_ms` (< 0: forever) for one connection. DEADLINE_EXCEEDED on timeout.
  StatusOr<std::unique_ptr<ControlChannel>> Accept(
      int timeout_ms, uint32_t max_frame_bytes = kMaxControlFrameBytes);

  const std::string& path() const { return path_; }

 private:
  ControlListener(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  const int fd_;
  const std::string path_;
};

}  // namespace tessera::ipc
