#include "response_cache.h"

#include <gtest/gtest.h>

namespace tessera::frontend {
namespace {

struct OneInputRequest {
  std::vector<float> values;
  dispatch::Request request;

  explicit OneInputRequest(std::vector<float> v, Shape shape = {1, 4}) : values(std::move(v)) {
    request.inputs.push_back(TensorView{"x", DataType::kFp32, std::move(shape), values.data(),
                                        values.size() * sizeof(float)});
  }
};

dispatch::Response ResponseOf(const std::string& bytes) {
  dispatch::Response response;
  response.outputs.push_back({"y", DataType::kFp32, {1, 1}, bytes});
  response.timing.compute_infer_ns = 1000;
  response.batch_size = 8;
  return response;
}

TEST(ResponseCacheTest, ARepeatedRequestGetsACopyOfTheAnswer) {
  ResponseCache cache(1 << 20);
  OneInputRequest a({1, 2, 3, 4});
  const ResponseCacheKey key = ResponseCache::KeyOf("m", 1, a.request);
  EXPECT_FALSE(cache.Lookup(key).has_value());
  cache.Insert(key, ResponseOf("abcd"));

  OneInputRequest same({1, 2, 3, 4});
  std::optional<dispatch::Response> hit = cache.Lookup(ResponseCache::KeyOf("m", 1, same.request));
  ASSERT_TRUE(hit.has_value());
  ASSERT_EQ(hit->outputs.size(), 1u);
  EXPECT_EQ(hit->outputs[0].bytes, "abcd");
  EXPECT_EQ(hit->outputs[0].shape, (Shape{1, 1}));
  EXPECT_EQ(hit->timing.compute_infer_ns, 0u);  // nothing ran for this one
  // The copy is the caller's: moving its bytes away leaves the cached answer whole.
  std::string taken = std::move(hit->outputs[0].bytes);
  EXPECT_EQ(cache.Lookup(key)->outputs[0].bytes, "abcd");
}

TEST(ResponseCacheTest, EverythingThatDecidesTheAnswerIsInTheKey) {
  OneInputRequest base({1, 2, 3, 4});
  const ResponseCacheKey key = ResponseCache::KeyOf("m", 1, base.request);
  auto differs = [&](const ResponseCacheKey& other) {
    return other.index != key.index && other.check != key.check;
  };
  OneInputRequest other_bytes({1, 2, 3, 5});
  EXPECT_TRUE(differs(ResponseCache::KeyOf("m", 1, other_bytes.request)));
  OneInputRequest other_shape({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(differs(ResponseCache::KeyOf("m", 1, other_shape.request)));
  EXPECT_TRUE(differs(ResponseCache::KeyOf("m", 2, base.request)));
  EXPECT_TRUE(differs(ResponseCache::KeyOf("n", 1, base.request)));
  OneInputRequest other_output({1, 2, 3, 4});
  other_output.request.requested_outputs = {"y"};
  EXPECT_TRUE(differs(ResponseCache::KeyOf("m", 1, other_output.request)));
  OneInputRequest other_name({1, 2, 3, 4});
  other_name.request.inputs[0].name = "z";
  EXPECT_TRUE(differs(ResponseCache::KeyOf("m", 1, other_name.request)));

  // A key whose index matches but whose check does not is a miss, never someone else's answer.
  ResponseCache cache(1 << 20);
  cache.Insert(key, ResponseOf("abcd"));
  EXPECT_FALSE(cache.Lookup(ResponseCacheKey{key.index, key.check + 1}).has_value());
}

TEST(ResponseCacheTest, TheLeastRecentlyUsedGoFirstWhenFull) {
  const uint64_t one = [] {
    ResponseCache probe(1 << 20);
    probe.Insert({1, 1}, ResponseOf(std::string(1000, 'a')));
    return probe.usage().bytes;
  }();
  ResponseCache cache(3 * one);
  cache.Insert({1, 1}, ResponseOf(std::string(1000, 'a')));
  cache.Insert({2, 2}, ResponseOf(std::string(1000, 'b')));
  cache.Insert({3, 3}, ResponseOf(std::string(1000, 'c')));
  EXPECT_TRUE(cache.Lookup({1, 1}).has_value());  // 1 is now the most recent; 2 the least
  cache.Insert({4, 4}, ResponseOf(std::string(1000, 'd')));
  EXPECT_FALSE(cache.Lookup({2, 2}).has_value());
  EXPECT_TRUE(cache.Lookup({1, 1}).has_value());
  EXPECT_TRUE(cache.Lookup({3, 3}).has_value());
  EXPECT_TRUE(cache.Lookup({4, 4}).has_value());
  EXPECT_EQ(cache.usage().entries, 3u);
  EXPECT_EQ(cache.usage().evictions, 1u);
  EXPECT_LE(cache.usage().bytes, 3 * one);

  // Larger than the whole cache: not kept, and nothing is evicted for it.
  cache.Insert({5, 5}, ResponseOf(std::string(10 * one, 'e')));
  EXPECT_FALSE(cache.Lookup({5, 5}).has_value());
  EXPECT_EQ(cache.usage().entries, 3u);
  // The same key again replaces the entry.
  cache.Insert({4, 4}, ResponseOf(std::string(1000, 'D')));
  EXPECT_EQ(cache.Lookup({4, 4})->outputs[0].bytes, std::string(1000, 'D'));
  EXPECT_EQ(cache.usage().entries, 3u);
}

}  // namespace
}  // namespace tessera::frontend
