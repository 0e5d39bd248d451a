// The config.pbtxt reader's scheduling blocks: ensemble_scheduling and sequence_batching, each
// written out as the same keys in config.yaml text for ParseModelConfig to check.
#include <string>
#include <utility>
#include <vector>

#include "triton_config_writer.h"

namespace tessera::repository::pbtxt {

// ensemble_scheduling, as the same keys in YAML (maps sorted by key, so errors do not depend on
// the map's iteration order).
void WriteEnsembleScheduling(const inference::ModelConfig& config, const Locator& root,
                             YamlWriter& yaml) {
  if (!config.has_ensemble_scheduling()) return;
  const int block_line = LineOr(root.At("ensemble_scheduling"), 1);
  const inference::ModelEnsembling& ensemble = config.ensemble_scheduling();
  Locator block = root.Nested("ensemble_scheduling", ensemble.GetDescriptor());
  yaml.Add(0, "ensemble_scheduling:", block_line);
  yaml.Add(2,
           ensemble.step().empty() ? "step: []" : "step:", LineOr(block.At("step", 0), block_line));
  auto write_map = [&](const google::protobuf::Map<std::string, std::string>& map, const char* key,
                       int line) {
    std::vector<std::pair<std::string, std::string>> entries(map.begin(), map.end());
    std::sort(entries.begin(), entries.end());
    std::vector<std::string> items;
    for (const auto& [from, to] : entries)
      items.push_back(absl::StrCat(Quoted(from), ": ", Quoted(to)));
    yaml.Add(4, absl::StrCat(key, ": {", absl::StrJoin(items, ", "), "}"), line);
  };
  for (int i = 0; i < ensemble.step_size(); ++i) {
    const inference::ModelEnsembling::Step& step = ensemble.step(i);
    const int line = LineOr(block.At("step", i), block_line);
    Locator at = block.Nested("step", step.GetDescriptor(), i);
    yaml.Add(2, absl::StrCat("- model_name: ", Quoted(step.model_name())),
             LineOr(at.At("model_name"), line));
    if (step.model_version() != 0) {  // proto3's 0 = left out = the latest, as -1
      yaml.Add(4, absl::StrCat("model_version: ", step.model_version()),
               LineOr(at.At("model_version"), line));
    }
    write_map(step.input_map(), "input_map", LineOr(at.At("input_map", 0), line));
    write_map(step.output_map(), "output_map", LineOr(at.At("output_map", 0), line));
    if (!step.model_namespace().empty()) {
      yaml.Add(4, absl::StrCat("model_namespace: ", Quoted(step.model_namespace())),
               LineOr(at.At("model_namespace"), line));
    }
  }
}

// sequence_batching, as the same keys in YAML. Fields at proto3's default are left out, so the
// YAML reader's defaults apply (Triton's too: an absent idle time is 1 s).
void WriteSequenceBatching(const inference::ModelConfig& config, const Locator& root,
                           YamlWriter& yaml) {
  if (!config.has_sequence_batching()) return;
  using Batching = inference::ModelSequenceBatching;
  const Batching& sequence = config.sequence_batching();
  const int block_line = LineOr(root.At("sequence_batching"), 1);
  Locator block = root.Nested("sequence_batching", sequence.GetDescriptor());
  yaml.Add(
      0, sequence.ByteSizeLong() == 0 ? "sequence_batching: {}" : "sequence_batching:", block_line);
  if (sequence.max_sequence_idle_microseconds() != 0) {
    yaml.Add(
        2,
        absl::StrCat("max_sequence_idle_microseconds: ", sequence.max_sequence_idle_microseconds()),
        LineOr(block.At("max_sequence_idle_microseconds"), block_line));
  }
  if (sequence.iterative_sequence()) {
    yaml.Add(2, "iterative_sequence: true", LineOr(block.At("iterative_sequence"), block_line));
  }
  if (sequence.has_direct()) {
    const Batching::StrategyDirect& direct = sequence.direct();
    yaml.Add(2,
             absl::StrCat(
                 "direct: {max_queue_delay_microseconds: ", direct.max_queue_delay_microseconds(),
                 ", minimum_slot_utilization: ", direct.minimum_slot_utilization(), "}"),
             LineOr(block.At("direct"), block_line));
  }
  if (sequence.has_oldest()) {
    const Batching::StrategyOldest& oldest = sequence.oldest();
    yaml.Add(2,
             absl::StrCat("oldest: {max_candidate_sequences: ", oldest.max_candidate_sequences(),
                          ", max_queue_delay_microseconds: ", oldest.max_queue_delay_microseconds(),
                          ", preserve_ordering: ", oldest.preserve_ordering() ? "true" : "false",
                          ", preferred_batch_size: ", FlowList(oldest.preferred_batch_size()), "}"),
             LineOr(block.At("oldest"), block_line));
  }
  auto bools = [](const google::protobuf::RepeatedField<bool>& values) {
    std::vector<std::string> text;
    for (bool b : values) text.push_back(b ? "true" : "false");
    return FlowList(text);
  };
  if (!sequence.control_input().empty()) {
    yaml.Add(2, "control_input:", LineOr(block.At("control_input", 0), block_line));
  }
  for (int i = 0; i < sequence.control_input_size(); ++i) {
    const Batching::ControlInput& input = sequence.control_input(i);
    const int line = LineOr(block.At("control_input", i), block_line);
    Locator at = block.Nested("control_input", input.GetDescriptor(), i);
    yaml.Add(4, absl::StrCat("- name: ", Quoted(input.name())), LineOr(at.At("name"), line));
    yaml.Add(
        6, input.control().empty() ? "control: []" : "control:", LineOr(at.At("control", 0), line));
    for (int k = 0; k < input.control_size(); ++k) {
      const Batching::Control& control = input.control(k);
      const int control_line = LineOr(at.At("control", k), line);
      yaml.Add(8, absl::StrCat("- kind: ", Batching::Control::Kind_Name(control.kind())),
               control_line);
      if (!control.int32_false_true().empty()) {
        yaml.Add(10, absl::StrCat("int32_false_true: ", FlowList(control.int32_false_true())),
                 control_line);
      }
      if (!control.fp32_false_true().empty()) {
        yaml.Add(10, absl::StrCat("fp32_false_true: ", FlowList(control.fp32_false_true())),
                 control_line);
      }
      if (!control.bool_false_true().empty()) {
        yaml.Add(10, absl::StrCat("bool_false_true: ", bools(control.bool_false_true())),
                 control_line);
      }
      if (control.data_type() != inference::TYPE_INVALID) {
        yaml.Add(10, absl::StrCat("data_type: ", inference::DataType_Name(control.data_type())),
                 control_line);
      }
    }
  }
  if (!sequence.state().empty()) {
    yaml.Add(2, "state:", LineOr(block.At("state", 0), block_line));
  }
  for (int i = 0; i < sequence.state_size(); ++i) {
    const Batching::State& state = sequence.state(i);
    const int line = LineOr(block.At("state", i), block_line);
    Locator at = block.Nested("state", state.GetDescriptor(), i);
    yaml.Add(4, absl::StrCat("- input_name: ", Quoted(state.input_name())),
             LineOr(at.At("input_name"), line));
    yaml.Add(6, absl::StrCat("output_name: ", Quoted(state.output_name())),
             LineOr(at.At("output_name"), line));
    yaml.Add(6, absl::StrCat("data_type: ", inference::DataType_Name(state.data_type())),
             LineOr(at.At("data_type"), line));
    yaml.Add(6, absl::StrCat("dims: ", FlowList(state.dims())), LineOr(at.At("dims", 0), line));
    if (state.use_same_buffer_for_input_output()) {
      yaml.Add(6, "use_same_buffer_for_input_output: true", line);
    }
    if (state.use_growable_memory()) {
      yaml.Add(6, "use_growable_memory: true", LineOr(at.At("use_growable_memory"), line));
    }
    if (!state.initial_state().empty()) {
      yaml.Add(6, "initial_state:", LineOr(at.At("initial_state", 0), line));
    }
    for (int k = 0; k < state.initial_state_size(); ++k) {
      const Batching::InitialState& initial = state.initial_state(k);
      const int initial_line = LineOr(at.At("initial_state", k), line);
      yaml.Add(8, absl::StrCat("- data_type: ", inference::DataType_Name(initial.data_type())),
               initial_line);
      yaml.Add(10, absl::StrCat("dims: ", FlowList(initial.dims())), initial_line);
      if (!initial.name().empty()) {
        yaml.Add(10, absl::StrCat("name: ", Quoted(initial.name())), initial_line);
      }
      if (initial.has_zero_data()) {
        yaml.Add(10, absl::StrCat("zero_data: ", initial.zero_data() ? "true" : "false"),
                 initial_line);
      }
      if (initial.has_data_file()) {
        yaml.Add(10, absl::StrCat("data_file: ", Quoted(initial.data_file())), initial_line);
      }
    }
  }
}

}  // namespace tessera::repository::pbtxt
