// Reading Triton's ragged batching keys of config.yaml (batch_input, batch_output, and the
// inputs' allow_ragged_batch, which ReadTensors reads); internal to the repository component.
#pragma once

#include "tessera/common/yaml_util.h"
#include "tessera/repository/model_config.h"

namespace tessera::repository {

// Reads `batch_input` and `batch_output` into the config, after its inputs, outputs and
// scheduling keys are read, and checks ragged batching as a whole. Refused: batch inputs or outputs
// without max_batch_size > 0 or without listed inputs and outputs (completion from the model file
// cannot tell a batch input's target from a client's input); a target named like a config input,
// another target, or (batch_output) not a config output; a source that is not a config input; a
// kind or data type Triton does not have; a BYTES batch output; a reshape on a ragged input or a
// batch output; an output -1 past its source input's rank; and, beside them, sequence_batching
// and ensembles.
Status ReadRaggedBatching(const yaml::YamlMap& root, ModelConfig& config);

}  // namespace tessera::repository
