#include "tessera/common/thread_name.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <string>
#include <thread>

namespace tessera {
namespace {

std::string NameInThread(const std::string& name) {
  std::string seen;
  std::thread([&] {
    SetCurrentThreadName(name);
    char buffer[32] = {};
    pthread_getname_np(pthread_self(), buffer, sizeof buffer);
    seen = buffer;
  }).join();
  return seen;
}

TEST(ThreadNameTest, NamesTheCallingThread) { EXPECT_EQ(NameInThread("ts-batcher"), "ts-batcher"); }

TEST(ThreadNameTest, LongNamesAreCutToLinuxsFifteenBytes) {
  // pthread_setname_np refuses a longer name outright; cut, it still names the thread.
  EXPECT_EQ(NameInThread("ts-inst-a_rather_long_model_name/1"), "ts-inst-a_rathe");
}

}  // namespace
}  // namespace tessera
