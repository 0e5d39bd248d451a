// Kernels that compute on strings: Equal on two STRING tensors and StringNormalizer.
//
// Case mapping is ASCII only: 'A'-'Z' and 'a'-'z' change, every other byte (so every byte of a
// multi-byte UTF-8 letter such as "Ü") stays as it is. That equals an en_US locale's mapping on
// ASCII text; StringNormalizer's `locale` must therefore be empty, C/POSIX or English ("en_US",
// "en_US.UTF-8", ...), anything else is refused at load rather than mapped differently.
#include <algorithm>
#include <string>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "engine/cpu/broadcast.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
char AsciiUpper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }

std::string MapCase(std::string_view s, char (*map)(char)) {
  std::string out(s);
  for (char& c : out) c = map(c);
  return out;
}

enum class CaseChange { kNone, kLower, kUpper };

StatusOr<CaseChange> CaseChangeOf(const Node& node) {
  const std::string action = node.attributes.GetString("case_change_action", "NONE");
  if (action == "NONE") return CaseChange::kNone;
  if (action == "LOWER") return CaseChange::kLower;
  if (action == "UPPER") return CaseChange::kUpper;
  return absl::InvalidArgumentError(
      absl::StrCat("case_change_action \"", action, "\" is not one of LOWER, UPPER and NONE"));
}

bool AsciiCaseLocale(const std::string& locale) {
  return locale.empty() || locale == "C" || locale == "POSIX" || locale.rfind("C.", 0) == 0 ||
         locale.rfind("en_", 0) == 0 || locale == "en";
}

}  // namespace

Status RunStringEqual(const OpContext& ctx, const Value& a, const Value& b,
                      std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(a.shape(), b.shape()));
  Value c = ctx.NewOutput(0, DataType::kBool, shape);
  BroadcastBinary(a.data<StringHandle>(), a.shape(), b.data<StringHandle>(), b.shape(),
                  c.mutable_data<uint8_t>(), shape, ctx.pool, [](StringHandle x, StringHandle y) {
                    return static_cast<uint8_t>(HandleView(x) == HandleView(y));
                  });
  (*outputs)[0] = std::move(c);
  return absl::OkStatus();
}

Status CheckStringNormalizer(const Node& node, const Graph&) {
  TESSERA_RETURN_IF_ERROR(CaseChangeOf(node).status());
  const std::string locale = node.attributes.GetString("locale", "");
  if (!AsciiCaseLocale(locale)) {
    return absl::UnimplementedError(absl::StrCat(
        "locale \"", locale, "\": only ASCII case mapping (empty, C, POSIX or en_* locales)"));
  }
  return absl::OkStatus();
}

Status RunStringNormalizer(const OpContext& ctx, const Node& node, const Inputs& inputs,
                           std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kString}));
  // The spec's only shapes: [C] and [1, C], C > 0.
  const bool row = x->rank() == 2 && x->dim(0) == 1;
  if ((x->rank() != 1 && !row) || x->num_elements() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("X is ", DescribeValue(*x), "; StringNormalizer takes [C] or [1, C], C > 0"));
  }
  if (ctx.strings == nullptr) return absl::InternalError("no string arena for StringNormalizer");
  TESSERA_ASSIGN_OR_RETURN(CaseChange change, CaseChangeOf(node));
  const bool case_sensitive = node.attributes.GetInt("is_case_sensitive", 0) != 0;
  std::unordered_set<std::string> stopwords;
  for (const std::string& word : node.attributes.GetStrings("stopwords")) {
    stopwords.insert(case_sensitive ? word : MapCase(word, AsciiLower));
  }
  std::vector<StringHandle> kept;
  const StringHandle* in = x->data<StringHandle>();
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    const std::string_view s = HandleView(in[i]);
    if (!stopwords.empty() &&
        stopwords.count(case_sensitive ? std::string(s) : MapCase(s, AsciiLower)) != 0) {
      continue;
    }
    if (change == CaseChange::kNone) {
      kept.push_back(in[i]);  // the same string: share its handle
      continue;
    }
    std::string mapped = MapCase(s, change == CaseChange::kLower ? AsciiLower : AsciiUpper);
    kept.push_back(mapped == s ? in[i] : ctx.strings->Add(std::move(mapped)));
  }
  // All removed: one empty string, as the spec asks.
  if (kept.empty()) kept.push_back(nullptr);
  const auto count = static_cast<int64_t>(kept.size());
  Value y = ctx.NewOutput(0, DataType::kString, row ? Shape{1, count} : Shape{count});
  std::copy(kept.begin(), kept.end(), y.mutable_data<StringHandle>());
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
