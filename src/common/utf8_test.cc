#include "tessera/common/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera {
namespace {

TEST(Utf8Test, AcceptsValidTextOfEveryLength) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9"));                 // é, 2 bytes
  EXPECT_TRUE(IsValidUtf8("\xE4\xB8\xAD"));                // 中, 3 bytes
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x98\x80"));            // U+1F600, 4 bytes
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));            // U+10FFFF, the last code point
  EXPECT_TRUE(IsValidUtf8(std::string("nul\0inside", 10)));  // NUL is valid UTF-8
}

TEST(Utf8Test, RefusesWhatRfc3629Forbids) {
  EXPECT_FALSE(IsValidUtf8("\x80"));                  // lone continuation byte
  EXPECT_FALSE(IsValidUtf8("caf\xC3"));               // cut short
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));              // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));          // overlong, 3 bytes
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));          // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));      // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xFF"));
  EXPECT_FALSE(IsValidUtf8("\xE4\xB8" "x"));          // bad continuation
}

TEST(Utf8Test, CoercionReplacesOnlyTheBadBytes) {
  EXPECT_EQ(CoerceToUtf8("/Conc\xA7t_output"), "/Conc?t_output");
  EXPECT_EQ(CoerceToUtf8("caf\xC3\xA9 \xFF\xFE ok"), "caf\xC3\xA9 ?? ok");
  EXPECT_EQ(CoerceToUtf8("\xE4\xB8"), "??");
  const std::string valid = "\xF0\x9F\x98\x80 fine";
  EXPECT_EQ(CoerceToUtf8(valid), valid);
  EXPECT_TRUE(IsValidUtf8(CoerceToUtf8("\xC0\xAF\xED\xA0\x80\x80")));
}

}  // namespace
}  // namespace tessera
