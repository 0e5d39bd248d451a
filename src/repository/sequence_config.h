// Reading a stateful model's config.yaml key (sequence_batching); internal to the repository
// component.
#pragma once

#include "tessera/common/yaml_util.h"
#include "tessera/repository/model_config.h"

namespace tessera::repository {

// Reads `sequence_batching` into config.sequence_batching, after the rest of the config is read:
// the strategy (direct or oldest), the idle timeout, the control inputs (one control each, each
// kind at most once) and the implicit states (fixed dims, zeros as the initial state). Refused
// beside it: dynamic_batching (Triton's scheduling_choice holds one), the response cache (an
// answer depends on the state), an ensemble, and a control or state tensor named like a config
// input or output.
Status ReadSequenceBatching(const yaml::YamlMap& root, ModelConfig& config);

}  // namespace tessera::repository
