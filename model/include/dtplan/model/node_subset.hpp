// Part of a node of several hosts, as a job allocated part of each one sees it: an NVL72 rack
// (one node, one NVLink domain of 18 trays) of which a cluster's scheduler hands the job 16
// trays, 64 GPUs, in every rack.
#pragma once

#include <cstdint>

#include "dtplan/model/topology.hpp"

namespace dtplan {

// The node's first `gpus` GPUs, in whole hosts (gpus_per_host of them each, in the order the
// template lists its GPUs). Devices reached only through the dropped GPUs (their hosts' CPUs,
// NICs and PCIe switches) go with them; what the kept GPUs share -- an NVSwitch, the network --
// stays, so every kept GPU keeps its links. The host memory stated per node scales with the
// hosts kept, and the assumptions say what was kept. All of its GPUs: the node itself. Throws
// dtplan::Error naming {gpus_per_node} when the node is one host, or `gpus` is not a positive
// multiple of its GPUs per host up to its GPU count.
NodeTemplate first_hosts(const NodeTemplate& node, std::int64_t gpus);

}  // namespace dtplan
