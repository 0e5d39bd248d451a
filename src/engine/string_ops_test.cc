// The CPU kernels on STRING values (string_tensor.h handles): data movement, Equal, Cast to and
// from STRING, StringNormalizer, ai.onnx.ml LabelEncoder, and the refusal of strings by every
// other kernel.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/cpu_op_runner_for_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tessera/common/bytes_tensor.h"

namespace tessera::engine::cpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Value Strings(Shape shape, std::vector<std::string> s) {
  return MakeStringValue(std::move(shape), std::move(s));
}

std::vector<std::string> Texts(const Value& v) {
  EXPECT_EQ(v.dtype(), DataType::kString);
  std::vector<std::string> out;
  for (int64_t i = 0; i < v.num_elements(); ++i) out.emplace_back(StringAt(v, i));
  return out;
}

std::string Message(const Status& status) { return std::string(status.message()); }

Attributes Attrs(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes attrs;
  for (const auto& [name, a] : list) attrs.Set(name, a);
  return attrs;
}

TEST(StringTensorTest, HandlesAreEightBytesAndNullIsTheEmptyString) {
  EXPECT_EQ(ElementSize(DataType::kString), 8u);
  const Value zeros = Value::Zeros(DataType::kString, {3});
  EXPECT_EQ(zeros.byte_size(), 24u);
  EXPECT_THAT(Texts(zeros), ElementsAre("", "", ""));
  const Value v = Strings({2}, {"", "a"});
  EXPECT_EQ(v.data<StringHandle>()[0], nullptr);
  const Value owned = OwnStrings(v);
  EXPECT_NE(owned.raw(), v.raw());
  EXPECT_THAT(Texts(owned), ElementsAre("", "a"));
}

TEST(StringTensorTest, BindsAndSerializesTheBytesForm) {
  std::string bytes;
  for (const char* s : {"ab", "", "xyz"}) AppendBytesElement(s, &bytes);
  StringArena arena;
  auto v = BindStrings("input \"t\"", {3}, bytes.data(), bytes.size(), &arena);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(Texts(*v), ElementsAre("ab", "", "xyz"));
  std::vector<std::byte> out;
  SerializeStrings(*v, &out);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(out.data()), out.size()), bytes);
  ExpectInvalidArgument(BindStrings("input \"t\"", {2}, bytes.data(), bytes.size(), &arena),
                        "input \"t\"");
  ExpectInvalidArgument(BindStrings("input \"t\"", {3}, bytes.data(), bytes.size() - 1, &arena),
                        "input \"t\"");
}

TEST(StringDataMovementTest, ShapeOpsMoveStrings) {
  const Value x = Strings({2, 3}, {"a", "bb", "", "d", "ee", "f"});
  const Value flat_shape = Int64s({1}, {6});
  auto reshaped = RunOp("Reshape", {&x, &flat_shape});
  ASSERT_TRUE(reshaped.ok()) << reshaped.status();
  EXPECT_EQ(reshaped->shape(), Shape({6}));
  EXPECT_THAT(Texts(*reshaped), ElementsAre("a", "bb", "", "d", "ee", "f"));
  auto identity = RunOp("Identity", {&x});
  ASSERT_TRUE(identity.ok());
  EXPECT_EQ(Texts(*identity), Texts(x));
  auto flat = RunOp("Flatten", {&x}, Attrs({{"axis", IntAttr(0)}}));
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->shape(), Shape({1, 6}));
  const Value axes = Int64s({1}, {0});
  auto unsqueezed = RunOp("Unsqueeze", {&x, &axes});
  ASSERT_TRUE(unsqueezed.ok());
  auto squeezed = RunOp("Squeeze", {&*unsqueezed, &axes});
  ASSERT_TRUE(squeezed.ok());
  EXPECT_EQ(squeezed->shape(), Shape({2, 3}));
  auto transposed = RunOp("Transpose", {&x});
  ASSERT_TRUE(transposed.ok());
  EXPECT_THAT(Texts(*transposed), ElementsAre("a", "d", "bb", "ee", "", "f"));
  auto shape = RunOp("Shape", {&x});
  ASSERT_TRUE(shape.ok());
  EXPECT_THAT(Elements<int64_t>(*shape), ElementsAre(2, 3));
  auto size = RunOp("Size", {&x});
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(size->data<int64_t>()[0], 6);
}

TEST(StringDataMovementTest, IndexingAndBroadcastingOpsMoveStrings) {
  const Value x = Strings({2, 2}, {"a", "b", "c", "d"});
  const Value idx = Int64s({3}, {1, 0, -1});
  auto gathered = RunOp("Gather", {&x, &idx}, Attrs({{"axis", IntAttr(1)}}));
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  EXPECT_THAT(Texts(*gathered), ElementsAre("b", "a", "b", "d", "c", "d"));
  auto concat = RunOpN("Concat", {&x, &x}, Attrs({{"axis", IntAttr(0)}}));
  ASSERT_TRUE(concat.ok());
  EXPECT_THAT(Texts((*concat)[0]), ElementsAre("a", "b", "c", "d", "a", "b", "c", "d"));
  const Value starts = Int64s({1}, {1}), ends = Int64s({1}, {2}), slice_axes = Int64s({1}, {1});
  auto sliced = RunOp("Slice", {&x, &starts, &ends, &slice_axes});
  ASSERT_TRUE(sliced.ok()) << sliced.status();
  EXPECT_THAT(Texts(*sliced), ElementsAre("b", "d"));
  const Value row = Strings({1, 2}, {"p", "q"});
  const Value target = Int64s({2}, {3, 2});
  auto expanded = RunOp("Expand", {&row, &target});
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  EXPECT_THAT(Texts(*expanded), ElementsAre("p", "q", "p", "q", "p", "q"));
  const Value repeats = Int64s({2}, {1, 2});
  auto tiled = RunOp("Tile", {&row, &repeats});
  ASSERT_TRUE(tiled.ok()) << tiled.status();
  EXPECT_THAT(Texts(*tiled), ElementsAre("p", "q", "p", "q"));
  const Value cond = Bools({2, 2}, {1, 0, 0, 1});
  const Value other = Strings({}, {"-"});
  auto where = RunOp("Where", {&cond, &x, &other});
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_THAT(Texts(*where), ElementsAre("a", "-", "-", "d"));
  auto split = RunOpN("Split", {&x}, Attrs({{"axis", IntAttr(1)}}), 2);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_THAT(Texts((*split)[1]), ElementsAre("b", "d"));
}

TEST(StringEqualTest, ComparesBytesWithBroadcasting) {
  const Value a = Strings({2, 2}, {"cat", "dog", "", "Cat"});
  const Value b = Strings({2}, {"cat", ""});
  auto eq = RunOp("Equal", {&a, &b});
  ASSERT_TRUE(eq.ok()) << eq.status();
  EXPECT_EQ(eq->dtype(), DataType::kBool);
  EXPECT_THAT(Elements<uint8_t>(*eq), ElementsAre(1, 0, 0, 0));
  const Value numbers = Int64s({2}, {1, 2});
  ExpectInvalidArgument(RunOp("Equal", {&a, &numbers}), "expected BYTES");
}

TEST(StringCastTest, NumbersFormatAsOnnxruntimeDoes) {
  const float inf = std::numeric_limits<float>::infinity();
  const Value f = Floats(
      {10}, {1.5f, 0.1f, 0.3f, 1e10f, -0.0f, inf, -inf, std::nanf(""), 123456789.0f, 100.0f});
  auto s = RunOp("Cast", {&f}, Attrs({{"to", IntAttr(8)}}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(Texts(*s), ElementsAre("1.5", "0.1", "0.30000001", "1e+10", "-0", "INF", "-INF",
                                     "NaN", "1.2345679e+08", "100"));
  const Value i = Int64s({2}, {-5, std::numeric_limits<int64_t>::min()});
  auto si = RunOp("Cast", {&i}, Attrs({{"to", IntAttr(8)}}));
  ASSERT_TRUE(si.ok());
  EXPECT_THAT(Texts(*si), ElementsAre("-5", "-9223372036854775808"));
  const Value b = Bools({2}, {1, 0});
  auto sb = RunOp("Cast", {&b}, Attrs({{"to", IntAttr(8)}}));
  ASSERT_TRUE(sb.ok());
  EXPECT_THAT(Texts(*sb), ElementsAre("1", "0"));
  const Value u = Make<uint8_t>(DataType::kUint8, {1}, {255});
  auto su = RunOp("CastLike", {&u, &*sb});
  ASSERT_TRUE(su.ok()) << su.status();
  EXPECT_THAT(Texts(*su), ElementsAre("255"));
}

TEST(StringCastTest, StringsParseToNumbers) {
  const Value s = Strings({6}, {"1.5", "  -2 ", "+3", "1e3", "inf", "-NaN"});
  auto f = RunOp("Cast", {&s}, Attrs({{"to", IntAttr(1)}}));
  ASSERT_TRUE(f.ok()) << f.status();
  const std::vector<float> got = Elements<float>(*f);
  EXPECT_THAT(std::vector<float>(got.begin(), got.begin() + 5),
              ElementsAre(1.5f, -2.0f, 3.0f, 1000.0f, std::numeric_limits<float>::infinity()));
  EXPECT_TRUE(std::isnan(got[5]));
  const Value big = Strings({2}, {"1e40", "-1e40"});
  auto overflow = RunOp("Cast", {&big}, Attrs({{"to", IntAttr(1)}}));
  ASSERT_TRUE(overflow.ok()) << overflow.status();
  EXPECT_THAT(Elements<float>(*overflow), ElementsAre(std::numeric_limits<float>::infinity(),
                                                      -std::numeric_limits<float>::infinity()));
  const Value ints = Strings({5}, {"12", " -3", "2.7", "1e3", "+7"});
  auto i64 = RunOp("Cast", {&ints}, Attrs({{"to", IntAttr(7)}}));
  ASSERT_TRUE(i64.ok()) << i64.status();
  EXPECT_THAT(Elements<int64_t>(*i64), ElementsAre(12, -3, 2, 1000, 7));
  auto i32 = RunOp("Cast", {&ints}, Attrs({{"to", IntAttr(6)}}));
  ASSERT_TRUE(i32.ok());
  EXPECT_THAT(Elements<int32_t>(*i32), ElementsAre(12, -3, 2, 1000, 7));
  const Value bytes = Strings({2}, {"300", "-1"});
  auto u8 = RunOp("Cast", {&bytes}, Attrs({{"to", IntAttr(2)}}));
  ASSERT_TRUE(u8.ok());
  EXPECT_THAT(Elements<uint8_t>(*u8), ElementsAre(44, 255));  // high bits dropped, as ORT
  const Value flags = Strings({4}, {"0", "2", "0.0", "-0.5"});
  auto b = RunOp("Cast", {&flags}, Attrs({{"to", IntAttr(9)}}));
  ASSERT_TRUE(b.ok());
  EXPECT_THAT(Elements<uint8_t>(*b), ElementsAre(0, 1, 0, 1));
}

TEST(StringCastTest, UnparsableStringsAreInvalidArgumentQuotingThem) {
  for (const char* bad : {"abc", "", "1.5abc", "0x10", "true"}) {
    const Value s = Strings({2}, {"1", bad});
    auto f = RunOp("Cast", {&s}, Attrs({{"to", IntAttr(1)}}));
    ExpectInvalidArgument(f, std::string("\"") + bad + "\" (element 1) to FP32");
  }
  const Value huge = Strings({1}, {"99999999999999999999"});
  ExpectInvalidArgument(RunOp("Cast", {&huge}, Attrs({{"to", IntAttr(7)}})), "to INT64");
  const Value bools = Strings({1}, {"yes"});
  ExpectInvalidArgument(RunOp("Cast", {&bools}, Attrs({{"to", IntAttr(9)}})), "\"yes\"");
  const Value long_text = Strings({1}, {std::string(1000, 'x')});
  auto f = RunOp("Cast", {&long_text}, Attrs({{"to", IntAttr(1)}}));
  ASSERT_FALSE(f.ok());
  EXPECT_LT(f.status().message().size(), 200u) << "the string is truncated in the message";
  EXPECT_THAT(Message(f.status()), HasSubstr("xxx..."));
}

TEST(StringNormalizerTest, LowersAndDropsStopwordsCaseInsensitively) {
  const Value x = Strings({5}, {"The", "quick", "THE", "Fox", "\xc3\x9c"});
  auto y = RunOp(
      "StringNormalizer", {&x},
      Attrs({{"case_change_action", StringAttr("LOWER")}, {"stopwords", StringsAttr({"the"})}}));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), Shape({3}));
  // ASCII case mapping only: the UTF-8 letter is left as it is.
  EXPECT_THAT(Texts(*y), ElementsAre("quick", "fox", "\xc3\x9c"));
}

TEST(StringNormalizerTest, UpperCaseSensitiveAndRowInput) {
  const Value x = Strings({1, 4}, {"The", "quick", "the", "a1b"});
  auto y = RunOp("StringNormalizer", {&x},
                 Attrs({{"case_change_action", StringAttr("UPPER")},
                        {"is_case_sensitive", IntAttr(1)},
                        {"stopwords", StringsAttr({"the"})}}));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), Shape({1, 3}));
  EXPECT_THAT(Texts(*y), ElementsAre("THE", "QUICK", "A1B"));
  auto none = RunOp("StringNormalizer", {&x});
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(Texts(*none), ElementsAre("The", "quick", "the", "a1b"));
}

TEST(StringNormalizerTest, AllDroppedGivesOneEmptyStringAndBadShapesAreRefused) {
  const Value x = Strings({1, 2}, {"a", "A"});
  auto y = RunOp("StringNormalizer", {&x}, Attrs({{"stopwords", StringsAttr({"a"})}}));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), Shape({1, 1}));
  EXPECT_THAT(Texts(*y), ElementsAre(""));
  const Value square = Strings({2, 2}, {"a", "b", "c", "d"});
  ExpectInvalidArgument(RunOp("StringNormalizer", {&square}), "[C] or [1, C]");
  const Value empty = Strings({0}, {});
  ExpectInvalidArgument(RunOp("StringNormalizer", {&empty}), "[C] or [1, C]");
}

TEST(StringNormalizerTest, LoadCheckRefusesOtherLocalesAndBadActions) {
  Graph graph;
  Node node;
  node.op_type = "StringNormalizer";
  node.attributes.Set("locale", StringAttr("en_US.UTF-8"));
  EXPECT_TRUE(CheckStringNormalizer(node, graph).ok());
  node.attributes.Set("locale", StringAttr("tr_TR"));
  const Status locale = CheckStringNormalizer(node, graph);
  EXPECT_EQ(locale.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Message(locale), HasSubstr("tr_TR"));
  node.attributes.Set("locale", StringAttr(""));
  node.attributes.Set("case_change_action", StringAttr("TITLE"));
  EXPECT_EQ(CheckStringNormalizer(node, graph).code(), absl::StatusCode::kInvalidArgument);
}

const std::string kLabelEncoder = std::string(kMlDomainPrefix) + "LabelEncoder";

TEST(LabelEncoderTest, StringToInt64WithDefault) {
  const Value x = Strings({2, 2}, {"Dori", "Amy", "Sally", ""});
  auto y = RunOp(kLabelEncoder, {&x},
                 Attrs({{"keys_strings", StringsAttr({"Amy", "Sally", ""})},
                        {"values_int64s", IntsAttr({5, 6, 7})},
                        {"default_int64", IntAttr(-9)}}),
                 nullptr, /*opset=*/2);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), Shape({2, 2}));
  EXPECT_THAT(Elements<int64_t>(*y), ElementsAre(-9, 5, 6, 7));
}

TEST(LabelEncoderTest, Int64ToStringAndStringToStringUseTheDefaultString) {
  const Value ids = Int64s({3}, {6, 5, 1});
  auto names = RunOp(
      kLabelEncoder, {&ids},
      Attrs({{"keys_int64s", IntsAttr({5, 6})}, {"values_strings", StringsAttr({"Amy", "Sally"})}}),
      nullptr, 2);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(Texts(*names), ElementsAre("Sally", "Amy", "_Unused"));
  const Value x = Strings({2}, {"a", "z"});
  auto mapped = RunOp(kLabelEncoder, {&x},
                      Attrs({{"keys_strings", StringsAttr({"a"})},
                             {"values_strings", StringsAttr({"A"})},
                             {"default_string", StringAttr("?")}}),
                      nullptr, 3);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_THAT(Texts(*mapped), ElementsAre("A", "?"));
}

TEST(LabelEncoderTest, NumericVariants) {
  const Value ids = Int64s({3}, {1, 2, 3});
  const Attributes repeated =
      Attrs({{"keys_int64s", IntsAttr({1, 3, 1})}, {"values_int64s", IntsAttr({10, 30, 11})}});
  auto i2i = RunOp(kLabelEncoder, {&ids}, repeated, nullptr, 2);
  ASSERT_TRUE(i2i.ok()) << i2i.status();
  EXPECT_THAT(Elements<int64_t>(*i2i), ElementsAre(10, -1, 30));  // first wins, as onnxruntime
  auto i2i_v4 = RunOp(kLabelEncoder, {&ids}, repeated, nullptr, 4);
  ASSERT_TRUE(i2i_v4.ok()) << i2i_v4.status();
  EXPECT_THAT(Elements<int64_t>(*i2i_v4), ElementsAre(11, -1, 30));  // last wins, as opset 4 says
  const Value f = Floats({3}, {0.5f, std::nanf(""), 2.0f});
  auto f2s = RunOp(kLabelEncoder, {&f},
                   Attrs({{"keys_floats", FloatsAttr({0.5f, std::nanf("")})},
                          {"values_strings", StringsAttr({"half", "nan"})}}),
                   nullptr, 2);
  ASSERT_TRUE(f2s.ok()) << f2s.status();
  EXPECT_THAT(Texts(*f2s), ElementsAre("half", "nan", "_Unused"));
  const Value s = Strings({2}, {"x", "y"});
  auto s2f = RunOp(kLabelEncoder, {&s},
                   Attrs({{"keys_strings", StringsAttr({"x"})},
                          {"values_floats", FloatsAttr({2.5f})},
                          {"default_float", FloatAttr(-1.0f)}}),
                   nullptr, 2);
  ASSERT_TRUE(s2f.ok()) << s2f.status();
  EXPECT_THAT(Elements<float>(*s2f), ElementsAre(2.5f, -1.0f));
}

TEST(LabelEncoderTest, Opset1ClassesMapBothWays) {
  const Attributes attrs = Attrs({{"classes_strings", StringsAttr({"a", "b", "c"})},
                                  {"default_int64", IntAttr(42)},
                                  {"default_string", StringAttr("none")}});
  const Value s = Strings({3}, {"c", "a", "q"});
  auto ids = RunOp(kLabelEncoder, {&s}, attrs, nullptr, 1);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(Elements<int64_t>(*ids), ElementsAre(2, 0, 42));
  const Value i = Int64s({3}, {1, 3, -1});
  auto names = RunOp(kLabelEncoder, {&i}, attrs, nullptr, 1);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(Texts(*names), ElementsAre("b", "none", "none"));
}

TEST(LabelEncoderTest, Opset4TensorAttributes) {
  Attribute keys, values, fallback;
  keys.kind = values.kind = fallback.kind = Attribute::Kind::kTensor;
  keys.tensor = Strings({2}, {"x", "y"});
  values.tensor = Int64s({2}, {7, 8});
  fallback.tensor = Int64s({1}, {0});
  const Value s = Strings({3}, {"y", "x", "w"});
  auto y =
      RunOp(kLabelEncoder, {&s},
            Attrs({{"keys_tensor", keys}, {"values_tensor", values}, {"default_tensor", fallback}}),
            nullptr, 4);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(Elements<int64_t>(*y), ElementsAre(8, 7, 0));
}

TEST(LabelEncoderTest, InvalidAttributesAndWrongInputTypeAreRefused) {
  Node node;
  node.op_type = kLabelEncoder;
  node.opset = 2;
  node.attributes.Set("keys_strings", StringsAttr({"a", "b"}));
  node.attributes.Set("values_int64s", IntsAttr({1}));
  EXPECT_THAT(Message(CheckLabelEncoder(node, Graph())), HasSubstr("2 keys but 1 values"));
  node.attributes.Set("keys_int64s", IntsAttr({1}));
  EXPECT_THAT(Message(CheckLabelEncoder(node, Graph())), HasSubstr("exactly one of keys"));
  const Value ints = Int64s({1}, {1});
  ExpectInvalidArgument(
      RunOp(kLabelEncoder, {&ints},
            Attrs({{"keys_strings", StringsAttr({"a"})}, {"values_int64s", IntsAttr({1})}}),
            nullptr, 2),
      "not the type of the keys");
}

TEST(StringRefusalTest, NumericKernelsNeverSeeStrings) {
  const Value x = Strings({2}, {"1", "2"});
  for (const char* op : {"Add", "Relu", "ReduceSum", "MatMul", "Pad", "ArgMax", "Less"}) {
    const OpDef* def = FindOp(op);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_FALSE(def->strings) << op;
    const Status refused = RefuseStrings(*def, op, {&x, &x});
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << op;
    EXPECT_THAT(Message(refused), HasSubstr("does not take string tensors")) << op;
  }
  ExpectInvalidArgument(RunOp("Add", {&x, &x}), "BYTES (string)");
  for (const char* op : {"Gather", "Concat", "Where", "Equal", "Cast", "StringNormalizer"}) {
    EXPECT_TRUE(FindOp(op)->strings) << op;
  }
}

}  // namespace
}  // namespace tessera::engine::cpu
