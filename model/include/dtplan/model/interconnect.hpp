// Interconnect constants (data/interconnect.json), one table documented row by row with
// sources in docs/communication-model.md:
//  - link classes: bandwidth per link and direction, the fraction of it bulk transfers
//    achieve, and whether the class supports in-switch reduction (NVLink SHARP);
//  - per collective algorithm (ring, tree, nvls) and protocol (LL, LL128, Simple): a base
//    latency per collective, a latency per hop by link kind, and the fraction of the link
//    bandwidth the protocol delivers. These follow the structure of NCCL's tuning model.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtplan/model/number_range.hpp"

namespace dtplan {

// A link's bandwidth in bytes/s: at least 1 MB/s, at most 100 TB/s.
inline constexpr NumberRange kLinkBandwidth{1e6, 1e14};

enum class LinkKind : std::uint8_t { nvlink, pcie, socket, network };
enum class Protocol { ll, ll128, simple };
enum class CommAlgorithm { ring, tree, nvls };
// The host CPUs' vendor: NCCL's network proxy costs more per step on some (tuning.cc,
// getNetOverhead). "other" is NCCL's default, and what an unstated vendor gets.
enum class CpuVendor { other, intel, amd };
CpuVendor parse_cpu_vendor(std::string_view text);  // throws naming the known vendors

std::string_view name_of(LinkKind k);
std::string_view name_of(Protocol p);
std::string_view name_of(CommAlgorithm a);

inline constexpr std::array<Protocol, 3> kProtocols{Protocol::ll, Protocol::ll128,
                                                    Protocol::simple};

struct LinkClass {
  std::string name;  // "nvlink3", "pcie4", "upi", "ib_ndr", ...
  LinkKind kind = LinkKind::pcie;
  double bandwidth_Bps = 0;          // one link, one direction
  double efficiency = 1;             // achieved fraction of bandwidth_Bps for bulk transfers
  bool in_switch_reduction = false;  // NVLink SHARP through an NVSwitch (Hopper and later)
};

// One protocol of one algorithm. Absent protocols are not offered by that algorithm.
struct ProtocolCost {
  double base_latency_s = 0;               // once per collective
  std::array<double, 4> hop_latency_s{};   // per hop, by LinkKind (socket counts as pcie)
  double bandwidth_fraction = 1;           // of the topology's bandwidth
  double bandwidth_fraction_one_node = 1;  // within one node (NCCL's tree LL128 differs)
  // Ring across nodes: every step, not only those crossing the network, waits at least for
  // the network proxy's overhead, by CpuVendor (NCCL: "inter-node rings still have to
  // launch nsteps * net overhead"). Zero where the table states none.
  std::array<double, 3> multi_node_step_s{};
  // Tree across nodes: NCCL caps each channel's bus bandwidth by GPU generation
  // (src/graph/tuning.cc, perChMaxTreeBws and perChMaxTreeLL128Bws), here keyed by the
  // NVLink class that marks the generation: {2 nodes, 3 or more}. Empty where not stated.
  std::map<std::string, std::array<double, 2>, std::less<>> channel_max_Bps_across_nodes;
  // Ring all-reduce across nodes with at least 64 bytes per channel and rank: NCCL multiplies
  // the latency by this factor, by the NVLink class of the generation ("plateau effect of
  // ring", ncclTopoGetAlgoTime). Empty where not stated.
  std::map<std::string, double, std::less<>> multi_node_all_reduce_latency_factor;
  // NCCL's size correction of the tree's bandwidth (treeCorrectionFactor, "trees are not
  // perfectly sticking to the model for medium sizes"): entry k applies to messages with
  // floor(log2(bytes / 64)) == k (0 below 128 bytes); none beyond the last. Empty: none.
  std::vector<double> bandwidth_factor_by_size;
};

struct AlgorithmCost {
  std::array<std::optional<ProtocolCost>, 3> protocols;  // by Protocol
  double bandwidth_efficiency = 1;  // nvls: achieved fraction of the GPU-switch link
  // nvls: NCCL's efficiency by GPU generation (keyed by its NVLink class) and the generation
  // bandwidth_efficiency was fitted on; another generation scales the fit by their ratio.
  std::map<std::string, double, std::less<>> generation_efficiency;
  std::string fitted_generation;

  // bandwidth_efficiency for the generation of NVLink class `nvlink_class`: scaled by NCCL's
  // ratio where both generations are stated, else as fitted.
  double efficiency_for(std::string_view nvlink_class) const;
};

class InterconnectTable {
 public:
  static InterconnectTable load(const std::filesystem::path& path);
  // Unknown names throw, listing the close ones.
  const LinkClass& find(std::string_view name) const;
  const std::vector<LinkClass>& classes() const { return classes_; }
  const AlgorithmCost& algorithm(CommAlgorithm a) const {
    return algorithms_[static_cast<std::size_t>(a)];
  }

 private:
  std::vector<LinkClass> classes_;
  std::array<AlgorithmCost, 3> algorithms_;
};

}  // namespace dtplan
