#include "tessera/ipc/control_channel.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::ipc {
namespace {

std::string UniqueSocketPath() {
  static std::atomic<int> counter{0};
  return "/tmp/tessera-ipc-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++) +
         ".sock";
}

ControlMessage MakeInfer(uint64_t batch_id, const std::string& key) {
  ControlMessage m;
  InferBatch* infer = m.mutable_infer();
  infer->set_batch_id(batch_id);
  infer->set_instance_key(key);
  BatchTensor* t = infer->add_inputs();
  t->set_name("x");
  t->set_offset(batch_id * 256);
  t->set_byte_size(16);
  t->add_shape(1);
  t->add_shape(4);
  return m;
}

TEST(ControlChannelTest, RoundTripBetweenThreadsOverARealSocket) {
  auto listener = ControlListener::Listen(UniqueSocketPath());
  ASSERT_TRUE(listener.ok()) << listener.status();

  std::thread client([path = (*listener)->path()] {
    auto channel = ControlChannel::Connect(path);
    ASSERT_TRUE(channel.ok()) << channel.status();
    ControlMessage hello;
    hello.mutable_hello()->set_executor_id(7);
    hello.mutable_hello()->set_device("cpu");
    ASSERT_TRUE((*channel)->Send(hello).ok());
    ControlMessage reply;
    ASSERT_TRUE((*channel)->Receive(&reply).ok());
    EXPECT_EQ(reply.infer().batch_id(), 42u);
    EXPECT_EQ(reply.infer().inputs(0).shape(1), 4);
  });

  auto server = (*listener)->Accept(5000);
  ASSERT_TRUE(server.ok()) << server.status();
  ControlMessage hello;
  ASSERT_TRUE((*server)->Receive(&hello).ok());
  EXPECT_EQ(hello.hello().executor_id(), 7);
  EXPECT_EQ(hello.hello().device(), "cpu");
  ASSERT_TRUE((*server)->Send(MakeInfer(42, "m/1")).ok());
  client.join();

  // The client is gone now: the next Receive reports the closed peer.
  ControlMessage eof;
  Status status = (*server)->Receive(&eof);
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_NE(status.message().find("peer closed"), std::string::npos);
}

TEST(ControlChannelTest, AcceptTimesOut) {
  auto listener = ControlListener::Listen(UniqueSocketPath());
  ASSERT_TRUE(listener.ok());
  auto start = std::chrono::steady_clock::now();
  auto channel = (*listener)->Accept(50);
  EXPECT_TRUE(absl::IsDeadlineExceeded(channel.status())) << channel.status();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(45));
}

TEST(ControlChannelTest, ListenReplacesAStaleSocketAndUnlinksOnDestruction) {
  std::string path = UniqueSocketPath();
  {
    auto first = ControlListener::Listen(path);
    ASSERT_TRUE(first.ok());
    // Simulate a crashed owner: the file stays because the destructor never ran.
    auto second = ControlListener::Listen(path);
    ASSERT_TRUE(second.ok()) << second.status();
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0);
  EXPECT_FALSE(ControlChannel::Connect(path).ok());
}

TEST(ControlChannelTest, ConcurrentSendersNeverInterleaveFrames) {
  auto pair = ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok());
  auto& [a, b] = *pair;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  std::vector<std::thread> senders;
  for (int t = 0; t < kThreads; ++t) {
    senders.emplace_back([&, t] {
      // A long key makes frames big enough that a torn write would show up.
      std::string key(3000 + t, static_cast<char>('a' + t));
      for (int i = 0; i < kPerThread; ++i) {
        ASSERT_TRUE(a->Send(MakeInfer(t * kPerThread + i, key)).ok());
      }
    });
  }
  std::set<uint64_t> seen;
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    ControlMessage m;
    ASSERT_TRUE(b->Receive(&m).ok());
    uint64_t id = m.infer().batch_id();
    int t = static_cast<int>(id / kPerThread);
    ASSERT_EQ(m.infer().instance_key(), std::string(3000 + t, static_cast<char>('a' + t)));
    seen.insert(id);
  }
  for (auto& s : senders) s.join();
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads * kPerThread));
}

TEST(ControlChannelTest, ShutdownUnblocksAReceiverOnAnotherThread) {
  auto pair = ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok());
  auto& [a, b] = *pair;
  std::atomic<bool> returned{false};
  Status status;
  std::thread reader([&] {
    ControlMessage m;
    status = a->Receive(&m);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned.load());
  a->Shutdown();
  reader.join();
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_TRUE(absl::IsUnavailable(a->Send(ControlMessage())));
  // The peer sees EOF.
  ControlMessage m;
  EXPECT_TRUE(absl::IsUnavailable(b->Receive(&m)));
}

TEST(ControlChannelTest, OversizedFrameIsRejectedWithoutAllocating) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  auto channel = ControlChannel::FromFd(fds[0]);
  ASSERT_TRUE(channel.ok());
  // 0xfffffff0 bytes announced: 4 GiB, far above the limit.
  const unsigned char header[4] = {0xf0, 0xff, 0xff, 0xff};
  ASSERT_EQ(write(fds[1], header, 4), 4);
  ControlMessage m;
  Status status = (*channel)->Receive(&m);
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  close(fds[1]);
}

TEST(ControlChannelTest, SmallerLimitAppliesToBothDirections) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  auto small = ControlChannel::FromFd(fds[0], /*max_frame_bytes=*/64);
  auto big = ControlChannel::FromFd(fds[1]);
  ASSERT_TRUE(small.ok() && big.ok());
  ControlMessage large = MakeInfer(1, std::string(200, 'k'));
  EXPECT_TRUE(absl::IsResourceExhausted((*small)->Send(large)));
  ASSERT_TRUE((*big)->Send(large).ok());
  ControlMessage m;
  EXPECT_TRUE(absl::IsResourceExhausted((*small)->Receive(&m)));
}

TEST(ControlChannelTest, GarbagePayloadIsDataLoss) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  auto channel = ControlChannel::FromFd(fds[0]);
  ASSERT_TRUE(channel.ok());
  const unsigned char frame[] = {4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  ASSERT_EQ(write(fds[1], frame, sizeof(frame)), static_cast<ssize_t>(sizeof(frame)));
  ControlMessage m;
  EXPECT_TRUE(absl::IsDataLoss((*channel)->Receive(&m)));
  close(fds[1]);
}

TEST(ControlChannelTest, PeerClosingMidFrameIsUnavailable) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  auto channel = ControlChannel::FromFd(fds[0]);
  ASSERT_TRUE(channel.ok());
  const unsigned char partial[] = {100, 0, 0, 0, 1, 2, 3};
  ASSERT_EQ(write(fds[1], partial, sizeof(partial)), static_cast<ssize_t>(sizeof(partial)));
  close(fds[1]);
  ControlMessage m;
  Status status = (*channel)->Receive(&m);
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
}

TEST(ControlChannelTest, PeerClosingMidFrameNamesHowManyPayloadBytesCame) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  auto channel = ControlChannel::FromFd(fds[0]);
  ASSERT_TRUE(channel.ok());
  const unsigned char partial[] = {100, 0, 0, 0, 1, 2, 3};
  ASSERT_EQ(write(fds[1], partial, sizeof(partial)), static_cast<ssize_t>(sizeof(partial)));
  close(fds[1]);
  ControlMessage m;
  Status status = (*channel)->Receive(&m);
  EXPECT_NE(status.message().find("after 3 of 100 payload bytes"), std::string::npos) << status;
}

TEST(ControlChannelTest, SendAllDeliversABurstInOrderAndReceiveServesItFromItsBuffer) {
  auto pair = ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok());
  auto& [a, b] = *pair;
  std::vector<ControlMessage> burst;
  for (uint64_t id = 1; id <= 5; ++id) burst.push_back(MakeInfer(id, "m/1"));
  ASSERT_TRUE(a->SendAll(burst).ok());
  EXPECT_FALSE(b->HasBufferedFrame());  // nothing read yet
  for (uint64_t id = 1; id <= 5; ++id) {
    ControlMessage m;
    ASSERT_TRUE(b->Receive(&m).ok());
    EXPECT_EQ(m.infer().batch_id(), id);
    // The first Receive read the whole burst: the rest is buffered, the last leaves none.
    EXPECT_EQ(b->HasBufferedFrame(), id < 5) << id;
  }
  EXPECT_TRUE(a->SendAll({}).ok());
}

TEST(ControlChannelTest, AFrameLargerThanTheReadChunkArrivesWhole) {
  auto pair = ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok());
  auto& [a, b] = *pair;
  ControlMessage big;
  big.mutable_result()->set_batch_id(9);
  big.mutable_result()->set_error(std::string(300 << 10, 'e'));  // 300 KiB, several recv(2)s
  std::thread sender([&] { EXPECT_TRUE(a->SendAll({big, MakeInfer(10, "m/1")}).ok()); });
  ControlMessage m;
  ASSERT_TRUE(b->Receive(&m).ok());
  EXPECT_EQ(m.result().error().size(), 300u << 10);
  ASSERT_TRUE(b->Receive(&m).ok());
  EXPECT_EQ(m.infer().batch_id(), 10u);
  sender.join();
}

TEST(ControlChannelTest, SendAllRefusesABurstWithAnOversizedMessageAndSendsNothing) {
  auto pair = ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok());
  auto small = ControlChannel::FromFd(dup((*pair).first->fd()), 64);
  ASSERT_TRUE(small.ok());
  ControlMessage large;
  large.mutable_load()->set_model_path(std::string(200, 'p'));
  EXPECT_TRUE(absl::IsResourceExhausted((*small)->SendAll({MakeInfer(1, "m/1"), large})));
  // The first frame that reaches the peer is the next one sent, not half of the refused burst.
  ASSERT_TRUE((*small)->Send(MakeInfer(7, "m/1")).ok());
  ControlMessage m;
  ASSERT_TRUE((*pair).second->Receive(&m).ok());
  EXPECT_EQ(m.infer().batch_id(), 7u);
}

TEST(ControlChannelTest, SendToAClosedPeerIsUnavailableNotSigpipe) {
  auto pair = ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok());
  pair->second.reset();
  // A few sends: the first may still land in the buffer of a dying socket on some kernels.
  Status status;
  for (int i = 0; i < 3 && status.ok(); ++i) status = pair->first->Send(MakeInfer(1, "m/1"));
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
}

TEST(ControlChannelTest, PassedDescriptorOutlivesTheProcessThatSentIt) {
  auto pair = ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok());
  const std::string content = "weights of model m/1";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: a frame without a descriptor, then one with a memory file holding `content`; exits.
    int fd = memfd_create("tessera-test-weights", MFD_CLOEXEC);
    if (fd < 0 || write(fd, content.data(), content.size()) != ssize_t(content.size())) _exit(1);
    if (!pair->first->Send(MakeInfer(1, "m/1")).ok()) _exit(2);
    if (!pair->first->SendWithFd(MakeInfer(2, "m/1"), fd).ok()) _exit(3);
    close(fd);
    _exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << wstatus;

  ControlMessage m;
  ASSERT_TRUE(pair->second->Receive(&m).ok());
  EXPECT_EQ(m.infer().batch_id(), 1u);
  ASSERT_TRUE(pair->second->Receive(&m).ok());
  EXPECT_EQ(m.infer().batch_id(), 2u);
  UniqueFd fd = pair->second->TakeReceivedFd();
  ASSERT_TRUE(fd.valid());
  EXPECT_FALSE(pair->second->TakeReceivedFd().valid());  // one descriptor was sent, not two
  void* mapped = mmap(nullptr, content.size(), PROT_READ, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(mapped, MAP_FAILED);
  EXPECT_EQ(std::string(static_cast<const char*>(mapped), content.size()), content);
  munmap(mapped, content.size());
}

TEST(ControlChannelTest, SendWithFdNeedsADescriptor) {
  auto pair = ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(pair->first->SendWithFd(MakeInfer(1, "m/1"), -1)));
}

TEST(ControlChannelTest, RoundTripAcrossFork) {
  auto listener = ControlListener::Listen(UniqueSocketPath());
  ASSERT_TRUE(listener.ok());
  std::string path = (*listener)->path();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: echo every InferBatch back as a BatchResult with the same id, until EOF.
    auto channel = ControlChannel::Connect(path);
    if (!channel.ok()) _exit(1);
    while (true) {
      ControlMessage in;
      Status status = (*channel)->Receive(&in);
      if (absl::IsUnavailable(status)) _exit(0);
      if (!status.ok()) _exit(2);
      ControlMessage out;
      out.mutable_result()->set_batch_id(in.infer().batch_id());
      out.mutable_result()->set_ok(true);
      if (!(*channel)->Send(out).ok()) _exit(3);
    }
  }
  auto channel = (*listener)->Accept(5000);
  ASSERT_TRUE(channel.ok()) << channel.status();
  for (uint64_t id = 1; id <= 100; ++id) {
    ASSERT_TRUE((*channel)->Send(MakeInfer(id, "m/1")).ok());
    ControlMessage reply;
    ASSERT_TRUE((*channel)->Receive(&reply).ok());
    ASSERT_EQ(reply.result().batch_id(), id);
  }
  (*channel)->Shutdown();
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0);
}

TEST(ControlChannelTest, ReceiveReturnsQuicklyWhenThePeerProcessIsKilled) {
  auto listener = ControlListener::Listen(UniqueSocketPath());
  ASSERT_TRUE(listener.ok());
  std::string path = (*listener)->path();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto channel = ControlChannel::Connect(path);
    if (!channel.ok()) _exit(1);
    ControlMessage hello;
    hello.mutable_hello()->set_pid(getpid());
    (void)(*channel)->Send(hello);
    pause();  // until SIGKILL
    _exit(0);
  }
  auto channel = (*listener)->Accept(5000);
  ASSERT_TRUE(channel.ok());
  ControlMessage hello;
  ASSERT_TRUE((*channel)->Receive(&hello).ok());
  EXPECT_EQ(hello.hello().pid(), pid);

  Status status;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    ControlMessage m;
    status = (*channel)->Receive(&m);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  reader.join();
  auto waited = std::chrono::steady_clock::now() - killed_at;
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_LT(waited, std::chrono::seconds(2));
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  EXPECT_TRUE(WIFSIGNALED(wstatus));
  // Writing to the dead peer fails cleanly; SIGPIPE would have killed this test.
  Status send;
  for (int i = 0; i < 3 && send.ok(); ++i) send = (*channel)->Send(MakeInfer(1, "m/1"));
  EXPECT_TRUE(absl::IsUnavailable(send)) << send;
}

}  // namespace
}  // namespace tessera::ipc
