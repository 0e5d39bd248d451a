#include "tessera/ipc/control_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "spdlog/spdlog.h"

namespace tessera::ipc {
namespace {

StatusOr<sockaddr_un> MakeAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("control socket path '", path, "' must be 1..",
                                                   sizeof(addr.sun_path) - 1, " bytes"));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

bool IsDisconnect(int err) { return err == EPIPE || err == ECONNRESET || err == ENOTCONN; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// ControlChannel

StatusOr<std::unique_ptr<ControlChannel>> ControlChannel::Connect(const std::string& socket_path,
                                                                  uint32_t max_frame_bytes) {
  TESSERA_ASSIGN_OR_RETURN(sockaddr_un addr, MakeAddress(socket_path));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("socket(): ", std::strerror(errno)));
  }
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int err = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot connect to control socket ", socket_path, ": ", std::strerror(err)));
  }
  return FromFd(fd, max_frame_bytes);
}

StatusOr<std::unique_ptr<ControlChannel>> ControlChannel::FromFd(int fd, uint32_t max_frame_bytes) {
  if (fd < 0) return absl::InvalidArgumentError("ControlChannel::FromFd: negative descriptor");
  return std::unique_ptr<ControlChannel>(new ControlChannel(fd, max_frame_bytes));
}

StatusOr<std::pair<std::unique_ptr<ControlChannel>, std::unique_ptr<ControlChannel>>>
ControlChannel::CreatePair() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::InternalError(absl::StrCat("socketpair(): ", std::strerror(errno)));
  }
  return std::make_pair(
      std::unique_ptr<ControlChannel>(new ControlChannel(fds[0], kMaxControlFrameBytes)),
      std::unique_ptr<ControlChannel>(new ControlChannel(fds[1], kMaxControlFrameBytes)));
}

ControlChannel::~ControlChannel() { close(fd_); }

void ControlChannel::Shutdown() {
  if (shut_down_.exchange(true)) return;
  // shutdown(2), not close(2): a concurrent reader wakes with EOF and the descriptor number cannot
  // be reused under its feet.
  ::shutdown(fd_, SHUT_RDWR);
}

namespace {

// One recv(2) asks for this much: every frame of a burst arrives in one call.
constexpr size_t kReadChunkBytes = 64 << 10;
constexpr size_t kMaxFdsPerRead = 8;

// Moves the SCM_RIGHTS descriptors of a received message into `fds`. Descriptors the kernel had
// to drop (MSG_CTRUNC) are gone: the reader then finds none for the frame that said it had one.
void TakeDescriptors(msghdr& msg, std::deque<UniqueFd>* fds) {
  if ((msg.msg_flags & MSG_CTRUNC) != 0) {
    spdlog::warn("control channel: descriptors passed by the peer were truncated and dropped");
  }
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
      fds->emplace_back(fd);
    }
  }
}

// Appends one length-prefixed frame to `frames`.
Status AppendFrame(const ControlMessage& message, uint32_t max_frame_bytes, std::string* frames) {
  const size_t payload = message.ByteSizeLong();
  if (payload > max_frame_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "control message of ", payload, " bytes exceeds the frame limit of ", max_frame_bytes));
  }
  const size_t at = frames->size();
  frames->resize(at + 4 + payload);
  const uint32_t length = static_cast<uint32_t>(payload);
  for (int i = 0; i < 4; ++i) (*frames)[at + i] = static_cast<char>((length >> (8 * i)) & 0xff);
  if (!message.SerializeToArray(frames->data() + at + 4, static_cast<int>(payload))) {
    return absl::InternalError("cannot serialize control message");
  }
  return absl::OkStatus();
}

uint32_t FrameLength(const char* header) {
  const auto* h = reinterpret_cast<const unsigned char*>(header);
  return static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 8) |
         (static_cast<uint32_t>(h[2]) << 16) | (static_cast<uint32_t>(h[3]) << 24);
}

}  // namespace

Status ControlChannel::Send(const ControlMessage& message) {
  std::string frame;
  TESSERA_RETURN_IF_ERROR(AppendFrame(message, max_frame_bytes_, &frame));
  return SendFrames(frame);
}

Status ControlChannel::SendAll(const std::vector<ControlMessage>& messages) {
  std::string frames;
  for (const ControlMessage& message : messages) {
    TESSERA_RETURN_IF_ERROR(AppendFrame(message, max_frame_bytes_, &frames));
  }
  if (frames.empty()) return absl::OkStatus();
  return SendFrames(frames);
}

Status ControlChannel::SendWithFd(const ControlMessage& message, int fd) {
  if (fd < 0) {
    return absl::InvalidArgumentError("ControlChannel::SendWithFd: no descriptor to pass");
  }
  std::string frame;
  TESSERA_RETURN_IF_ERROR(AppendFrame(message, max_frame_bytes_, &frame));
  return SendFrames(frame, fd);
}

Status ControlChannel::SendFrames(const std::string& frames, int fd) {
  absl::MutexLock lock(&send_mu_);
  if (shut_down_.load()) return absl::UnavailableError("control channel shut down");
  size_t sent = 0;
  while (sent < frames.size()) {
    iovec iov{const_cast<char*>(frames.data() + sent), frames.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (sent == 0 && fd >= 0) {
      std::memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
    }
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      if (IsDisconnect(err) || shut_down_.load()) {
        return absl::UnavailableError(
            absl::StrCat("control channel peer closed (send: ", std::strerror(err), ")"));
      }
      return absl::InternalError(absl::StrCat("control channel send: ", std::strerror(err)));
    }
    sent += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

Status ControlChannel::Fill(size_t size) {
  if (read_end_ - read_pos_ >= size) return absl::OkStatus();
  if (read_pos_ > 0) {
    std::memmove(read_buffer_.data(), read_buffer_.data() + read_pos_, read_end_ - read_pos_);
    read_end_ -= read_pos_;
    read_pos_ = 0;
  }
  if (read_buffer_.size() < std::max(size, kReadChunkBytes)) {
    read_buffer_.resize(std::max(size, kReadChunkBytes));
  }
  while (read_end_ < size) {
    iovec iov{read_buffer_.data() + read_end_, read_buffer_.size() - read_end_};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    // Room for a few descriptors: a peer passes at most one per frame, and such frames are rare
    // (weight exports), so one read-ahead rarely spans several.
    alignas(cmsghdr) char control[CMSG_SPACE(kMaxFdsPerRead * sizeof(int))];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = ::recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
    if (n >= 0) TakeDescriptors(msg, &received_fds_);
    if (n > 0) {
      read_end_ += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return absl::UnavailableError(shut_down_.load() ? "control channel shut down (peer closed)"
                                                      : "control channel peer closed");
    }
    if (errno == EINTR) continue;
    int err = errno;
    if (IsDisconnect(err)) {
      return absl::UnavailableError(
          absl::StrCat("control channel peer closed (recv: ", std::strerror(err), ")"));
    }
    return absl::InternalError(absl::StrCat("control channel recv: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

UniqueFd ControlChannel::TakeReceivedFd() {
  if (received_fds_.empty()) return UniqueFd();
  UniqueFd fd = std::move(received_fds_.front());
  received_fds_.pop_front();
  return fd;
}

bool ControlChannel::HasBufferedFrame() const {
  const size_t available = read_end_ - read_pos_;
  if (available < 4) return false;
  const uint32_t length = FrameLength(read_buffer_.data() + read_pos_);
  // An oversized length is "ready" too: Receive reports it without blocking.
  return length > max_frame_bytes_ || available - 4 >= length;
}

Status ControlChannel::Receive(ControlMessage* message) {
  Status status = Fill(4);
  if (!status.ok()) {
    if (read_end_ > read_pos_ && absl::IsUnavailable(status)) {
      return absl::UnavailableError("control channel peer closed in the middle of a frame header");
    }
    return status;
  }
  const uint32_t length = FrameLength(read_buffer_.data() + read_pos_);
  if (length > max_frame_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "control frame of ", length, " bytes exceeds the limit of ", max_frame_bytes_, " bytes"));
  }
  status = Fill(4 + static_cast<size_t>(length));
  if (!status.ok()) {
    if (absl::IsUnavailable(status)) {
      return absl::UnavailableError(absl::StrCat("control channel peer closed after ",
                                                 read_end_ - read_pos_ - 4, " of ", length,
                                                 " payload bytes"));
    }
    return status;
  }
  const char* payload = read_buffer_.data() + read_pos_ + 4;
  read_pos_ += 4 + static_cast<size_t>(length);
  if (!message->ParseFromArray(payload, static_cast<int>(length))) {
    return absl::DataLossError(
        absl::StrCat("control frame of ", length, " bytes is not a valid ControlMessage"));
  }
  if (read_pos_ == read_end_) {
    read_pos_ = read_end_ = 0;
    // A rare huge frame must not keep its buffer for the life of the channel.
    if (read_buffer_.size() > 16 * kReadChunkBytes) {
      read_buffer_.resize(kReadChunkBytes);
      read_buffer_.shrink_to_fit();
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// ControlListener

StatusOr<std::unique_ptr<ControlListener>> ControlListener::Listen(const std::string& socket_path) {
  TESSERA_ASSIGN_OR_RETURN(sockaddr_un addr, MakeAddress(socket_path));
  struct stat st {};
  if (lstat(socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::AlreadyExistsError(
          absl::StrCat("control socket path ", socket_path, " exists and is not a socket"));
    }
    unlink(socket_path.c_str());
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("socket(): ", std::strerror(errno)));
  }
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    return absl::InternalError(
        absl::StrCat("cannot bind control socket ", socket_path, ": ", std::strerror(err)));
  }
  if (listen(fd, 16) != 0) {
    int err = errno;
    close(fd);
    unlink(socket_path.c_str());
    return absl::InternalError(
        absl::StrCat("cannot listen on control socket ", socket_path, ": ", std::strerror(err)));
  }
  return std::unique_ptr<ControlListener>(new ControlListener(fd, socket_path));
}

ControlListener::~ControlListener() {
  close(fd_);
  unlink(path_.c_str());
}

StatusOr<std::unique_ptr<ControlChannel>> ControlListener::Accept(int timeout_ms,
                                                                  uint32_t max_frame_bytes) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  while (true) {
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      wait_ms = left.count() > 0 ? static_cast<int>(left.count()) : 0;
    }
    pollfd pfd{fd_, POLLIN, 0};
    int rc = poll(&pfd, 1, wait_ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(
          absl::StrCat("poll on control socket ", path_, ": ", std::strerror(errno)));
    }
    if (rc == 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("no connection on control socket ", path_, " within ", timeout_ms, " ms"));
    }
    int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn >= 0) return ControlChannel::FromFd(conn, max_frame_bytes);
    // The connection may have gone away between poll and accept; keep waiting.
    if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
    return absl::InternalError(
        absl::StrCat("accept on control socket ", path_, ": ", std::strerror(errno)));
  }
}

}  // namespace tessera::ipc
