#include "tessera/scheduler/interference.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <limits>
#include <utility>

#include "Eigen/Dense"
#include "absl/strings/str_cat.h"
#include "tessera/common/yaml_util.h"
#include "yaml_text.h"

namespace tessera::scheduler {
namespace {

using yaml::YamlMap;

// Four utilisation features plus the constant (seed 001 §4.4).
constexpr int kTerms = 5;
// A pivot of the column-pivoted QR below this fraction of the largest one counts as zero: the
// design is then (nearly) collinear and the coefficients would be arbitrary.
constexpr double kRankThreshold = 1e-9;

constexpr std::array<std::string_view, 6> kFileKeys = {"kind",      "coefficients", "slowdown",
                                                       "synthetic", "source",       "note"};
constexpr std::array<std::string_view, 3> kKinds = {"none", "constant", "linear"};
constexpr std::array<std::string_view, 5> kCoefficientKeys = {"l2_self", "l2_other", "dram_self",
                                                              "dram_other", "constant"};
// Coefficients are O(1) in every published fit; far outside that, the file is corrupt.
constexpr double kMaxCoefficient = 1e6;

}  // namespace

InterferenceModel InterferenceModel::None() { return InterferenceModel(); }

InterferenceModel InterferenceModel::Constant(double slowdown) {
  InterferenceModel model;
  model.kind_ = Kind::kConstant;
  model.constant_ = slowdown;
  return model;
}

InterferenceModel InterferenceModel::Linear(InterferenceCoefficients coefficients) {
  InterferenceModel model;
  model.kind_ = Kind::kLinear;
  model.coefficients_ = coefficients;
  return model;
}

double InterferenceModel::Factor(double l2_self, double dram_self, double l2_other,
                                 double dram_other) const {
  switch (kind_) {
    case Kind::kNone:
      return 1;
    case Kind::kConstant:
      return std::max(1.0, constant_);
    case Kind::kLinear: {
      // seed 001 §4.4: factor = c1·L2_m1 + c2·L2_m2 + c3·mem_m1 + c4·mem_m2 + c5, m1 = the model
      // being slowed. Co-running can only slow a model down, so the fit's < 1 values (small
      // utilisations, where c5 < 1 dominates) are clamped as the gpulet artifact does.
      const InterferenceCoefficients& c = coefficients_;
      const double factor = c.l2_self * l2_self + c.l2_other * l2_other + c.dram_self * dram_self +
                            c.dram_other * dram_other + c.constant;
      return std::isfinite(factor) ? std::max(1.0, factor) : 1.0;
    }
  }
  return 1;
}

double InterferenceModel::Factor(const ModelProfile& self, int self_batch, int self_partition_pct,
                                 const ModelProfile& other, int other_batch,
                                 int other_partition_pct) const {
  if (kind_ != Kind::kLinear) return Factor(0, 0, 0, 0);
  // Utilisations of each side running alone on its own partition (seed 001 §4.4 [R]).
  return Factor(self.L2Util(self_batch, self_partition_pct),
                self.DramUtil(self_batch, self_partition_pct),
                other.L2Util(other_batch, other_partition_pct),
                other.DramUtil(other_batch, other_partition_pct));
}

StatusOr<InterferenceCoefficients> FitInterference(const std::vector<CoLocationSample>& samples) {
  if (samples.size() < kTerms) {
    return absl::InvalidArgumentError(
        absl::StrCat("interference fit needs at least ", kTerms, " samples, got ", samples.size()));
  }
  const Eigen::Index n = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd x(n, kTerms);
  Eigen::VectorXd y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const CoLocationSample& s = samples[static_cast<size_t>(i)];
    x.row(i) << s.l2_self, s.l2_other, s.dram_self, s.dram_other, 1.0;
    y(i) = s.slowdown;
    if (!x.row(i).allFinite() || !std::isfinite(s.slowdown)) {
      return absl::InvalidArgumentError(
          absl::StrCat("interference sample ", i, " has a value that is not a finite number"));
    }
  }
  // Ordinary least squares via column-pivoted QR: it reveals rank, which normal equations would
  // hide behind a nearly singular XᵀX.
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(x);
  qr.setThreshold(kRankThreshold);
  if (qr.rank() < kTerms) {
    return absl::InvalidArgumentError(absl::StrCat(
        "interference samples are collinear (design rank ", qr.rank(), " of ", kTerms,
        "): the features l2_self, l2_other, dram_self, dram_other and the constant must vary "
        "independently, e.g. samples from several model pairs, batches and partition splits"));
  }
  const Eigen::VectorXd c = qr.solve(y);
  if (!c.allFinite()) return absl::InvalidArgumentError("interference fit did not converge");
  return InterferenceCoefficients{c(0), c(1), c(2), c(3), c(4)};
}

std::vector<double> RelativeErrors(const InterferenceModel& model,
                                   const std::vector<CoLocationSample>& samples) {
  std::vector<double> errors;
  errors.reserve(samples.size());
  for (const CoLocationSample& s : samples) {
    const double predicted = model.Factor(s.l2_self, s.dram_self, s.l2_other, s.dram_other);
    errors.push_back(std::abs(predicted - s.slowdown) / s.slowdown);
  }
  return errors;
}

StatusOr<InterferenceModel> ParseInterferenceYaml(const std::string& text,
                                                  std::string_view source) {
  TESSERA_ASSIGN_OR_RETURN(YAML::Node doc, yaml::ParseDocument(text, source));
  if (doc.IsNull()) return yaml::ErrorAt(source, 1, "", "empty interference file");
  TESSERA_ASSIGN_OR_RETURN(YamlMap root, YamlMap::Create(source, doc, "", kFileKeys));

  if (!root.Has("kind")) return root.Missing("kind");
  std::string kind;
  TESSERA_RETURN_IF_ERROR(root.GetEnum("kind", kKinds, &kind));
  bool synthetic = false;  // for people; the model does not carry it
  TESSERA_RETURN_IF_ERROR(root.GetBool("synthetic", &synthetic));
  std::string text_value;
  TESSERA_RETURN_IF_ERROR(root.GetString("source", &text_value));
  TESSERA_RETURN_IF_ERROR(root.GetString("note", &text_value));

  if (kind != "linear" && root.Has("coefficients")) {
    return yaml::ErrorAt(source, root.KeyLine("coefficients"), "coefficients",
                         absl::StrCat("only with kind linear (kind is ", kind, ")"));
  }
  if (kind != "constant" && root.Has("slowdown")) {
    return yaml::ErrorAt(source, root.KeyLine("slowdown"), "slowdown",
                         absl::StrCat("only with kind constant (kind is ", kind, ")"));
  }
  if (kind == "none") return InterferenceModel::None();
  if (kind == "constant") {
    if (!root.Has("slowdown")) return root.Missing("slowdown");
    double slowdown = 1;
    // A co-runner cannot speed a model up; 100× is far beyond any measured slowdown.
    TESSERA_RETURN_IF_ERROR(root.GetDouble("slowdown", 1, 100, &slowdown));
    return InterferenceModel::Constant(slowdown);
  }
  std::optional<YAML::Node> node = root.Get("coefficients");
  if (!node) return root.Missing("coefficients");
  TESSERA_ASSIGN_OR_RETURN(YamlMap m,
                           YamlMap::Create(source, *node, "coefficients", kCoefficientKeys));
  InterferenceCoefficients c;
  double* fields[] = {&c.l2_self, &c.l2_other, &c.dram_self, &c.dram_other, &c.constant};
  for (size_t i = 0; i < kCoefficientKeys.size(); ++i) {
    if (!m.Has(kCoefficientKeys[i])) return m.Missing(kCoefficientKeys[i]);
    TESSERA_RETURN_IF_ERROR(
        m.GetDouble(kCoefficientKeys[i], -kMaxCoefficient, kMaxCoefficient, fields[i]));
  }
  return InterferenceModel::Linear(c);
}

StatusOr<InterferenceModel> LoadInterferenceFile(const std::filesystem::path& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, yaml::ReadFileToString(path.string()));
  return ParseInterferenceYaml(text, path.string());
}

std::string InterferenceToYaml(const InterferenceModel& model, std::string_view comment) {
  std::string out;
  // Every comment line becomes a YAML comment, so no text can break the document.
  size_t start = 0;
  while (start < comment.size()) {
    size_t end = comment.find('\n', start);
    if (end == std::string_view::npos) end = comment.size();
    std::string_view line = comment.substr(start, end - start);
    out += line.empty() ? "#\n" : absl::StrCat("# ", yaml::AsAbsl(line), "\n");
    start = end + 1;
  }
  out += "# Format: docs/profile-format.md. factor = c1*l2_self + c2*l2_other + c3*dram_self\n";
  out += "#   + c4*dram_other + c5 (seed 001 sec. 4.4), clamped to >= 1.\n";
  switch (model.kind()) {
    case InterferenceModel::Kind::kNone:
      out += "kind: none\n";
      break;
    case InterferenceModel::Kind::kConstant:
      out += "kind: constant\n";
      absl::StrAppend(&out, "slowdown: ", FormatYamlNumber(model.constant_slowdown()), "\n");
      break;
    case InterferenceModel::Kind::kLinear: {
      const InterferenceCoefficients& c = model.coefficients();
      out += "kind: linear\ncoefficients:\n";
      const std::pair<const char*, double> rows[] = {{"l2_self", c.l2_self},
                                                     {"l2_other", c.l2_other},
                                                     {"dram_self", c.dram_self},
                                                     {"dram_other", c.dram_other},
                                                     {"constant", c.constant}};
      for (size_t i = 0; i < std::size(rows); ++i) {
        absl::StrAppend(&out, "  ", rows[i].first, ": ", FormatYamlNumber(rows[i].second), "  # c",
                        i + 1, "\n");
      }
      break;
    }
  }
  return out;
}

}  // namespace tessera::scheduler
