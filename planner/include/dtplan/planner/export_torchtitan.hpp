// An FSDP2 tensor x context x pipeline layout as a torchtitan job config (TOML, the sections
// and keys of torchtitan/config/job_config.py: [training], [parallelism],
// [activation_checkpoint]), for `torchrun ... -m torchtitan.train --job.config_file FILE`.
#pragma once

#include <string>

#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/model/model_desc.hpp"

namespace dtplan::planner {

// Throws dtplan::Error naming what torchtitan cannot run: a layout under Megatron-LM, tensor
// parallelism without sequence parallelism (torchtitan always shards the norms' sequence),
// Ulysses context parallelism, a pipeline schedule PyTorch's pipelining does not offer, or a
// hybrid shard group that context parallelism does not divide.
std::string torchtitan_config(const ModelDesc& m, const cost::Layout3D& l);

}  // namespace dtplan::planner
