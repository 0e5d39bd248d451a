// Reading an ensemble's config.yaml keys (platform: ensemble, ensemble_scheduling); internal to
// the repository component.
#pragma once

#include "tessera/common/yaml_util.h"
#include "tessera/repository/model_config.h"

namespace tessera::repository {

// Reads `ensemble_scheduling` into config.ensemble_steps and checks what an ensemble must hold,
// after the rest of the config is read: the steps' data flow (every step input is an ensemble
// input or another step's output, each tensor produced once, no cycle, every ensemble output
// produced, every ensemble input used), listed inputs and outputs (there is no model file to
// complete them from), and none of the keys that configure a model's own instances or batching.
// The composing models themselves are checked when the ensemble loads.
Status ReadEnsembleScheduling(const yaml::YamlMap& root, ModelConfig& config);

}  // namespace tessera::repository
