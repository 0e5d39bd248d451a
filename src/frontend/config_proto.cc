#include "config_proto.h"

#include "absl/strings/str_cat.h"

namespace tessera::frontend {
namespace {

inference::DataType ToWire(DataType type) { return static_cast<inference::DataType>(type); }

void FillSequenceBatching(const repository::SequenceBatchingConfig& config,
                          inference::ModelSequenceBatching* wire) {
  using Control = inference::ModelSequenceBatching::Control;
  wire->set_max_sequence_idle_microseconds(config.max_sequence_idle_microseconds);
  if (config.oldest) {
    auto* oldest = wire->mutable_oldest();
    oldest->set_max_candidate_sequences(config.max_candidate_sequences);
    for (int size : config.preferred_batch_sizes) oldest->add_preferred_batch_size(size);
    oldest->set_max_queue_delay_microseconds(config.max_queue_delay_microseconds);
  } else {
    wire->mutable_direct()->set_max_queue_delay_microseconds(config.max_queue_delay_microseconds);
  }
  for (const SequenceControl& control : config.controls) {
    auto* input = wire->add_control_input();
    input->set_name(control.input_name);
    Control* out = input->add_control();
    switch (control.kind) {
      case SequenceControl::Kind::kStart:
        out->set_kind(Control::CONTROL_SEQUENCE_START);
        break;
      case SequenceControl::Kind::kReady:
        out->set_kind(Control::CONTROL_SEQUENCE_READY);
        break;
      case SequenceControl::Kind::kEnd:
        out->set_kind(Control::CONTROL_SEQUENCE_END);
        break;
      case SequenceControl::Kind::kCorrelationId:
        out->set_kind(Control::CONTROL_SEQUENCE_CORRID);
        out->set_data_type(ToWire(control.data_type));
        continue;
    }
    for (double value : {control.false_value, control.true_value}) {
      if (control.data_type == DataType::kInt32)
        out->add_int32_false_true(static_cast<int32_t>(value));
      if (control.data_type == DataType::kFp32) out->add_fp32_false_true(static_cast<float>(value));
      if (control.data_type == DataType::kBool) out->add_bool_false_true(value != 0);
    }
  }
  for (const SequenceState& state : config.states) {
    auto* out = wire->add_state();
    out->set_input_name(state.input_name);
    out->set_output_name(state.output_name);
    out->set_data_type(ToWire(state.data_type));
    for (int64_t dim : state.dims) out->add_dims(dim);
    if (state.initial_data_file.empty() && state.initial_dims.empty()) continue;
    auto* initial = out->add_initial_state();
    initial->set_data_type(ToWire(state.data_type));
    for (int64_t dim : StartShape(state)) initial->add_dims(dim);
    if (state.initial_data_file.empty()) {
      initial->set_zero_data(true);
    } else {
      initial->set_data_file(state.initial_data_file);
    }
  }
}

void ToWire(const repository::QueuePolicy& policy, inference::ModelQueuePolicy* wire) {
  wire->set_max_queue_size(policy.max_queue_size);
  wire->set_default_timeout_microseconds(policy.default_timeout_microseconds);
  wire->set_allow_timeout_override(policy.allow_timeout_override);
  wire->set_timeout_action(policy.timeout_delays ? inference::ModelQueuePolicy::DELAY
                                                 : inference::ModelQueuePolicy::REJECT);
}

}  // namespace

inference::ModelConfig ToTritonModelConfig(const repository::ModelConfig& config) {
  inference::ModelConfig wire;
  wire.set_name(config.name);
  wire.set_platform(config.platform);
  wire.set_backend("tessera");
  wire.set_max_batch_size(config.max_batch_size);
  wire.set_default_model_filename(config.default_model_filename);

  auto* policy = wire.mutable_version_policy();
  switch (config.version_policy.kind) {
    case repository::VersionPolicy::Kind::kLatest:
      policy->mutable_latest()->set_num_versions(config.version_policy.latest_num_versions);
      break;
    case repository::VersionPolicy::Kind::kAll:
      policy->mutable_all();
      break;
    case repository::VersionPolicy::Kind::kSpecific:
      for (int64_t v : config.version_policy.specific_versions) {
        policy->mutable_specific()->add_versions(v);
      }
      break;
  }

  for (const auto& tensor : config.inputs) {
    auto* input = wire.add_input();
    input->set_name(tensor.name);
    input->set_data_type(ToWire(tensor.data_type));
    for (int64_t dim : tensor.dims) input->add_dims(dim);
    if (tensor.reshape) {
      input->mutable_reshape();  // set even when empty: `reshape: {}` is a scalar per item
      for (int64_t dim : *tensor.reshape) input->mutable_reshape()->add_shape(dim);
    }
    input->set_allow_ragged_batch(tensor.allow_ragged_batch);
    input->set_optional(tensor.optional);
  }
  for (const repository::BatchInputConfig& batch_input : config.batch_inputs) {
    auto* out = wire.add_batch_input();
    out->set_kind(static_cast<inference::BatchInput::Kind>(batch_input.kind));
    for (const std::string& target : batch_input.target_names) out->add_target_name(target);
    out->set_data_type(ToWire(batch_input.data_type));
    out->add_source_input(batch_input.source_input);
  }
  for (const repository::BatchOutputConfig& batch_output : config.batch_outputs) {
    auto* out = wire.add_batch_output();
    for (const std::string& target : batch_output.target_names) out->add_target_name(target);
    out->set_kind(inference::BatchOutput::BATCH_SCATTER_WITH_INPUT_SHAPE);
    out->add_source_input(batch_output.source_input);
  }
  for (const auto& tensor : config.outputs) {
    auto* output = wire.add_output();
    output->set_name(tensor.name);
    output->set_data_type(ToWire(tensor.data_type));
    for (int64_t dim : tensor.dims) output->add_dims(dim);
    if (tensor.reshape) {
      output->mutable_reshape();
      for (int64_t dim : *tensor.reshape) output->mutable_reshape()->add_shape(dim);
    }
    output->set_label_filename(tensor.label_filename);
  }

  if (config.dynamic_batching.enabled) {
    auto* batching = wire.mutable_dynamic_batching();
    if (config.dynamic_batching.preferred_batch_sizes.empty()) {
      batching->add_preferred_batch_size(config.max_batch_size);
    }
    for (int size : config.dynamic_batching.preferred_batch_sizes) {
      batching->add_preferred_batch_size(size);
    }
    batching->set_max_queue_delay_microseconds(config.dynamic_batching.max_queue_delay_microseconds);
    const repository::DynamicBatchingConfig& db = config.dynamic_batching;
    batching->set_priority_levels(db.priority_levels);
    batching->set_default_priority_level(db.default_priority_level);
    const repository::QueuePolicy& fallback = db.default_queue_policy;
    if (fallback.max_queue_size > 0 || fallback.default_timeout_microseconds > 0 ||
        fallback.allow_timeout_override || fallback.timeout_delays) {
      ToWire(fallback, batching->mutable_default_queue_policy());
    }
    for (const auto& [level, policy] : db.priority_queue_policy) {
      ToWire(policy, &(*batching->mutable_priority_queue_policy())[level]);
    }
  }

  int group_index = 0;
  for (const auto& group : config.instance_groups) {
    auto* wire_group = wire.add_instance_group();
    wire_group->set_name(group.name.empty() ? absl::StrCat(config.name, "_", group_index)
                                            : group.name);
    wire_group->set_count(group.count);
    switch (group.kind) {
      case repository::InstanceKind::kAuto:
        wire_group->set_kind(inference::ModelInstanceGroup::KIND_AUTO);
        break;
      case repository::InstanceKind::kGpu:
        wire_group->set_kind(inference::ModelInstanceGroup::KIND_GPU);
        break;
      case repository::InstanceKind::kCpu:
        wire_group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
        break;
    }
    for (int gpu : group.gpus) wire_group->add_gpus(gpu);
    ++group_index;
  }

  for (const repository::EnsembleStep& step : config.ensemble_steps) {
    auto* wire_step = wire.mutable_ensemble_scheduling()->add_step();
    wire_step->set_model_name(step.model_name);
    wire_step->set_model_version(step.model_version);
    for (const auto& [from, to] : step.input_map) (*wire_step->mutable_input_map())[from] = to;
    for (const auto& [from, to] : step.output_map) (*wire_step->mutable_output_map())[from] = to;
  }

  if (config.sequence_batching.enabled) {
    FillSequenceBatching(config.sequence_batching, wire.mutable_sequence_batching());
  }
  if (config.response_cache) wire.mutable_response_cache()->set_enable(true);
  for (const auto& [key, value] : config.metric_tags) (*wire.mutable_metric_tags())[key] = value;
  (*wire.mutable_parameters())["precision"].set_string_value(config.precision);
  if (config.slo_ms > 0) {
    (*wire.mutable_parameters())["slo_ms"].set_string_value(absl::StrCat(config.slo_ms));
  }
  return wire;
}

void FillModelMetadata(const std::string& name, const std::vector<int64_t>& versions,
                       const repository::ModelConfig& config,
                       inference::ModelMetadataResponse* response) {
  response->set_name(name);
  for (int64_t v : versions) response->add_versions(absl::StrCat(v));
  response->set_platform(config.platform);
  auto fill = [&](const repository::TensorConfig& tensor, auto* out) {
    out->set_name(tensor.name);
    out->set_datatype(std::string(DataTypeToWireName(tensor.data_type)));
    // perf_analyzer drops the first dim when max_batch_size > 0 (serving-systems.md §2.4).
    if (config.max_batch_size > 0) out->add_shape(-1);
    for (int64_t dim : tensor.dims) out->add_shape(dim);
  };
  for (const auto& tensor : config.inputs) fill(tensor, response->add_inputs());
  for (const auto& tensor : config.outputs) fill(tensor, response->add_outputs());
}

void FillServerMetadata(const std::string& version, bool client_shm,
                        inference::ServerMetadataResponse* response) {
  response->set_name("tessera");
  response->set_version(version);
  for (const char* extension :
       {"model_repository", "model_repository(unload_dependents)", "model_configuration",
        "binary_tensor_data", "statistics", "classification", "sequence"}) {
    response->add_extensions(extension);
  }
  if (client_shm) response->add_extensions("system_shared_memory");
}

}  // namespace tessera::frontend
