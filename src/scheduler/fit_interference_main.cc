// tessera-fit-interference: fits the linear interference model of seed 001 §4.4 to pairwise
// co-location samples and writes profiles/<device>/interference.yaml.
//
// Protocol as in the paper: split the samples at random (seeded) into a training part (70 %:
// seed 001 used 1,750 of 2,500) and a validation part, fit by least squares on the training part,
// and report the relative-error percentiles on the validation part (the paper: 90 % of cases
// ≤ 10.26 %, 95 % ≤ 13.98 %, Fig. 10). Formats: docs/profile-format.md.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "interference_fit.h"
#include "tessera/common/yaml_util.h"
#include "tessera/scheduler/interference.h"
#include "yaml_text.h"

namespace {

using tessera::scheduler::InterferenceModel;

std::string Percent(double fraction) { return absl::StrFormat("%.2f %%", 100 * fraction); }

int Run(int argc, char** argv) {
  CLI::App app{
      "tessera-fit-interference: least-squares fit of the linear interference model (seed 001 "
      "sec. 4.4) to co-location samples"};
  std::string samples_path, out_path, source;
  double train_fraction = 0.7;
  uint64_t seed = 1;
  bool synthetic = false;
  app.add_option("--samples", samples_path,
                 "Samples CSV (l2_self,l2_other,dram_self,dram_other,slowdown[,...])")
      ->required();
  app.add_option("--out", out_path,
                 "Write the fitted model here (interference.yaml); "
                 "without it, only the report is printed");
  app.add_option("--train-fraction", train_fraction,
                 "Share of samples used for fitting; the rest validates (default 0.7)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", seed, "Seed of the random train/validation split (default 1)");
  app.add_flag("--synthetic", synthetic, "Mark the output synthetic: true (synthetic samples)");
  app.add_option("--source", source, "Free text written as the output's source: key");
  CLI11_PARSE(app, argc, argv);

  auto text = tessera::yaml::ReadFileToString(samples_path);
  if (!text.ok()) {
    std::cerr << "tessera-fit-interference: " << text.status().message() << "\n";
    return 2;
  }
  auto samples = tessera::scheduler::ParseSamplesCsv(*text, samples_path);
  if (!samples.ok()) {
    std::cerr << "tessera-fit-interference: " << samples.status().message() << "\n";
    return 2;
  }
  auto split = tessera::scheduler::SplitSamples(*samples, train_fraction, seed);
  if (!split.ok()) {
    std::cerr << "tessera-fit-interference: " << split.status().message() << "\n";
    return 2;
  }
  auto fit = tessera::scheduler::FitInterference(split->train);
  if (!fit.ok()) {
    std::cerr << "tessera-fit-interference: " << samples_path << ": " << fit.status().message()
              << "\n";
    return 1;
  }
  const InterferenceModel model = InterferenceModel::Linear(*fit);
  // With everything used for fitting there is nothing held out: report the training error.
  const bool held_out = !split->validation.empty();
  const auto errors =
      tessera::scheduler::RelativeErrors(model, held_out ? split->validation : split->train);
  using tessera::scheduler::Percentile;
  const std::string counts =
      absl::StrCat(samples->size(), " samples: ", split->train.size(), " train, ",
                   split->validation.size(), " validation, split seed ", seed);
  const std::string error_line = absl::StrCat(
      held_out ? "Validation" : "Training (nothing held out)", " relative error: p50 ",
      Percent(Percentile(errors, 0.5)), ", p90 ", Percent(Percentile(errors, 0.9)), ", p95 ",
      Percent(Percentile(errors, 0.95)), " (seed 001 Fig. 10: p90 10.26 %, p95 13.98 %)");

  const auto& c = *fit;
  std::cout << samples_path << ": " << counts << "\n"
            << absl::StrFormat(
                   "coefficients: l2_self %.5f, l2_other %.5f, dram_self %.5f, dram_other %.5f, "
                   "constant %.5f\n",
                   c.l2_self, c.l2_other, c.dram_self, c.dram_other, c.constant)
            << error_line << "\n";
  if (out_path.empty()) return 0;

  std::string comment;
  if (synthetic) {
    comment +=
        "SYNTHETIC: fitted to synthetic co-location samples; the numbers are NOT measured.\n";
  }
  absl::StrAppend(&comment, "Fitted by tessera-fit-interference from ", samples_path, "\n", counts,
                  "\n", error_line);
  std::string yaml = tessera::scheduler::InterferenceToYaml(model, comment);
  if (synthetic) yaml += "synthetic: true\n";
  if (!source.empty()) {
    absl::StrAppend(&yaml, "source: ", tessera::scheduler::QuoteYamlString(source), "\n");
  }
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  out << yaml;
  out.close();
  if (!out) {
    std::cerr << "tessera-fit-interference: cannot write " << out_path << "\n";
    return 2;
  }
  std::cout << "wrote " << out_path << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
