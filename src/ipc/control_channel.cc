#include "tessera/ipc/control_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

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

Status ControlChannel::Send(const ControlMessage& message) {
  const size_t payload = message.ByteSizeLong();
  if (payload > max_frame_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "control message of ", payload, " bytes exceeds the frame limit of ", max_frame_bytes_));
  }
  std::string frame(4 + payload, '\0');
  const uint32_t length = static_cast<uint32_t>(payload);
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  if (!message.SerializeToArray(frame.data() + 4, static_cast<int>(payload))) {
    return absl::InternalError("cannot serialize control message");
  }

  absl::MutexLock lock(&send_mu_);
  if (shut_down_.load()) return absl::UnavailableError("control channel shut down");
  size_t sent = 0;
  while (sent < frame.size()) {
    ssize_t n = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
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

namespace {

// Reads exactly `size` bytes. `*got` tells how many arrived before EOF or an error.
Status ReadFull(int fd, char* data, size_t size, size_t* got, const std::atomic<bool>& shut_down) {
  *got = 0;
  while (*got < size) {
    ssize_t n = ::recv(fd, data + *got, size - *got, 0);
    if (n > 0) {
      *got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return absl::UnavailableError(shut_down.load() ? "control channel shut down (peer closed)"
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

}  // namespace

Status ControlChannel::Receive(ControlMessage* message) {
  unsigned char header[4];
  size_t got = 0;
  Status status = ReadFull(fd_, reinterpret_cast<char*>(header), sizeof(header), &got, shut_down_);
  if (!status.ok()) {
    if (got > 0 && absl::IsUnavailable(status)) {
      return absl::UnavailableError("control channel peer closed in the middle of a frame header");
    }
    return status;
  }
  const uint32_t length =
      static_cast<uint32_t>(header[0]) | (static_cast<uint32_t>(header[1]) << 8) |
      (static_cast<uint32_t>(header[2]) << 16) | (static_cast<uint32_t>(header[3]) << 24);
  if (length > max_frame_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "control frame of ", length, " bytes exceeds the limit of ", max_frame_bytes_, " bytes"));
  }
  std::string payload(length, '\0');
  status = ReadFull(fd_, payload.data(), length, &got, shut_down_);
  if (!status.ok()) {
    if (absl::IsUnavailable(status)) {
      return absl::UnavailableError(absl::StrCat("control channel peer closed after ", got, " of ",
                                                 length, " payload bytes"));
    }
    return status;
  }
  if (!message->ParseFromString(payload)) {
    return absl::DataLossError(
        absl::StrCat("control frame of ", length, " bytes is not a valid ControlMessage"));
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
