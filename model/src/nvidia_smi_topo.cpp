// Reading the matrix `nvidia-smi topo -m` prints into a node template.
//
// The matrix gives, for each pair of devices, the kind of path between them:
//   NV#  a bonded set of # NVLinks          PIX  at most one PCIe bridge (same switch)
//   PXB  several PCIe bridges, no host bridge (same switch tree)
//   PHB  through a PCIe host bridge (CPU root complex)
//   NODE across host bridges inside a NUMA node      SYS  across the SMP link (QPI/UPI)
// It does not give link generations or bandwidths; SmiAssumptions supplies the classes and
// the node template records every assumption made.
//
// Built graph: one CPU vertex per NUMA node (sockets fully connected by the socket class);
// one PCIe switch per group of devices joined by PIX/PXB (a lone device attaches to its CPU
// directly); NVLink edges per NV# pair, or one NVSwitch when every GPU pair has the same NV#.
#include <algorithm>
#include <charconv>
#include <map>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>

#include "dtplan/model/error.hpp"
#include "dtplan/model/topology_io.hpp"

namespace dtplan {

namespace {

enum class Path { self, nvlink, pix, pxb, phb, node, sys };

struct Cell {
  Path path = Path::sys;
  std::int64_t nvlinks = 0;
};

struct Matrix {
  std::vector<std::string> labels;  // column labels: GPU0.., NIC0.. or mlx5_0..
  std::vector<std::vector<Cell>> cells;
  std::vector<std::optional<std::int64_t>> numa;  // NUMA Affinity column per row
};

std::vector<std::string> tokens_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;)
    out.push_back(t);
  return out;
}

bool is_gpu_label(const std::string& s) {
  return std::regex_match(s, std::regex("GPU[0-9]+"));
}

class SmiParser {
 public:
  SmiParser(std::string_view text, std::string origin) : origin_(std::move(origin)) {
    std::string line;
    std::istringstream in{std::string(text)};
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      // Terminals get underlined headers: drop ANSI escape sequences such as ESC[4m.
      line = std::regex_replace(line, std::regex("\x1b\\[[0-9;]*[A-Za-z]"), "");
      lines_.push_back(line);
    }
  }

  Matrix parse() {
    const std::size_t header = find_header();
    Matrix m;
    for (const auto& t : tokens_of(lines_[header])) {
      if (t == "CPU" || t == "NUMA" || t == "Affinity" || t == "GPU" || t == "ID") break;
      check_label(t, header + 1);
      m.labels.push_back(t);
    }
    const std::size_t n = m.labels.size();
    m.cells.assign(n, std::vector<Cell>(n));
    m.numa.assign(n, std::nullopt);
    std::vector<bool> seen(n, false);
    std::size_t rows = 0;
    for (std::size_t i = header + 1; i < lines_.size(); ++i) {
      const auto t = tokens_of(lines_[i]);
      if (t.empty()) continue;
      if (t.front().rfind("Legend", 0) == 0) break;
      // Every line up to the legend is a row: none is skipped unread.
      if (rows == n) {
        fail(i + 1, "'" + t.front() + "' after the " + std::to_string(n) +
                        " rows of the header's columns (expected the Legend)");
      }
      read_row(m, t, i + 1, seen);
      ++rows;
    }
    for (std::size_t r = 0; r < n; ++r) {
      if (!seen[r]) fail(0, "no row for " + m.labels[r] + " (the matrix must be square)");
    }
    check_symmetric(m);
    return m;
  }

 private:
  [[noreturn]] void fail(std::size_t line, const std::string& what) const {
    throw Error(origin_ + (line > 0 ? ":" + std::to_string(line) : "") +
                ": nvidia-smi topo -m: " + what);
  }

  // A column is a GPU (GPU0, GPU1, ...) or a NIC (NIC0, mlx5_0, ...); anything else, such as
  // GPU with a non-ASCII digit, would otherwise be read as a NIC and the GPU lost.
  void check_label(const std::string& label, std::size_t line) const {
    if (is_gpu_label(label)) return;
    if (label.rfind("GPU", 0) != 0 &&
        std::regex_match(label, std::regex("[A-Za-z][A-Za-z0-9_]*"))) {
      return;
    }
    fail(line, "header column '" + label +
                   "' is neither GPU<number> (ASCII digits) nor a NIC name such as NIC0 or mlx5_0");
  }

  std::size_t find_header() const {
    for (std::size_t i = 0; i < lines_.size(); ++i) {
      const auto t = tokens_of(lines_[i]);
      if (!t.empty() && t.front() == "GPU0") return i;
    }
    fail(0, "no header line starting with GPU0 (paste the whole output of `nvidia-smi topo -m`)");
  }

  // Digits as a count. std::stoll threw std::out_of_range past 2^63, which escaped as a
  // crash (found by fuzzing: tests/fuzz/regressions/smi_topo).
  std::int64_t count_of(const std::string& digits, std::size_t line,
                        const std::string& where) const {
    std::int64_t value = 0;
    const auto* end = digits.data() + digits.size();
    const auto [ptr, ec] = std::from_chars(digits.data(), end, value);
    if (ec != std::errc() || ptr != end) fail(line, where + ": '" + digits + "' is out of range");
    return value;
  }

  Cell parse_cell(const std::string& s, std::size_t line, const std::string& where) const {
    static const std::map<std::string, Path> kPaths = {
        {"X", Path::self},    {"PIX", Path::pix}, {"PXB", Path::pxb}, {"PHB", Path::phb},
        {"NODE", Path::node}, {"SYS", Path::sys}, {"SOC", Path::sys}};
    if (const auto it = kPaths.find(s); it != kPaths.end()) return {it->second, 0};
    std::smatch match;
    if (std::regex_match(s, match, std::regex("NV([0-9]+)"))) {
      const auto links = count_of(match[1], line, where);
      if (links < 1) fail(line, where + ": NV0 is not a link");
      return {Path::nvlink, links};
    }
    fail(line,
         where + ": unknown connection '" + s + "' (legend: X, NV#, PIX, PXB, PHB, NODE, SYS)");
  }

  void read_row(Matrix& m, const std::vector<std::string>& t, std::size_t line,
                std::vector<bool>& seen) const {
    const std::size_t n = m.labels.size();
    const auto it = std::find(m.labels.begin(), m.labels.end(), t.front());
    if (it == m.labels.end()) fail(line, "row '" + t.front() + "' is not a column of the header");
    const auto r = static_cast<std::size_t>(it - m.labels.begin());
    if (seen[r]) fail(line, t.front() + " listed twice");
    seen[r] = true;
    if (t.size() < n + 1) {
      fail(line, "row " + t.front() + " has " + std::to_string(t.size() - 1) +
                     " cells, the header " + std::to_string(n) + " columns");
    }
    for (std::size_t c = 0; c < n; ++c) {
      m.cells[r][c] = parse_cell(t[c + 1], line, "row " + t.front() + ", column " + m.labels[c]);
      if ((m.cells[r][c].path == Path::self) != (r == c)) {
        fail(line, "row " + t.front() + ", column " + m.labels[c] +
                       (r == c ? ": the diagonal must be X" : ": X off the diagonal"));
      }
    }
    // After the matrix: CPU Affinity, NUMA Affinity (an integer or N/A), ...
    if (t.size() >= n + 3 && std::regex_match(t[n + 2], std::regex("[0-9]+"))) {
      m.numa[r] = count_of(t[n + 2], line, "row " + t.front() + ", NUMA affinity");
    }
  }

  void check_symmetric(const Matrix& m) const {
    for (std::size_t r = 0; r < m.labels.size(); ++r) {
      for (std::size_t c = r + 1; c < m.labels.size(); ++c) {
        const auto& a = m.cells[r][c];
        const auto& b = m.cells[c][r];
        if (a.path != b.path || a.nvlinks != b.nvlinks) {
          fail(0, "the matrix is not symmetric between " + m.labels[r] + " and " + m.labels[c]);
        }
      }
    }
  }

  std::string origin_;
  std::vector<std::string> lines_;
};

struct UnionFind {
  explicit UnionFind(std::size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  std::size_t find(std::size_t x) { return parent[x] == x ? x : parent[x] = find(parent[x]); }
  void join(std::size_t a, std::size_t b) { parent[find(a)] = find(b); }
  std::vector<std::size_t> parent;
};

// Dense group numbers 0..k-1 in order of first appearance.
std::vector<std::int64_t> group_ids(UnionFind& uf, std::size_t n) {
  std::map<std::size_t, std::int64_t> ids;
  std::vector<std::int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto root = uf.find(i);
    const auto [it, fresh] = ids.emplace(root, static_cast<std::int64_t>(ids.size()));
    out[i] = it->second;
  }
  return out;
}

std::string nvlink_class_for(std::int64_t links_per_gpu, const SmiAssumptions& a) {
  if (!a.nvlink_class.empty()) return a.nvlink_class;
  return links_per_gpu <= 6 ? "nvlink2" : links_per_gpu <= 12 ? "nvlink3" : "nvlink4";
}

class SmiGraphBuilder {
 public:
  SmiGraphBuilder(const Matrix& m, const SmiAssumptions& a, std::string origin)
      : m_(m), a_(a), n_(m.labels.size()) {
    t_.name = "nvidia-smi";
    t_.origin = std::move(origin);
    t_.description = "read from nvidia-smi topo -m";
  }

  NodeTemplate build() {
    auto socket = sockets();
    place_unknown_devices(socket);
    const auto sw = switches();
    add_devices(socket, sw);
    add_nvlinks();
    if (t_.nic_count() > 0) t_.network = NetworkSpec{a_.nic_class, 32, 1.0};
    t_.assumptions.push_back("PCIe links and switch uplinks assumed " + a_.pcie_class);
    t_.assumptions.push_back("PXB read as one PCIe switch; PHB and NODE paths cross the CPU");
    return t_;
  }

 private:
  bool is_gpu(std::size_t i) const { return is_gpu_label(m_.labels[i]); }
  Path path(std::size_t i, std::size_t j) const { return m_.cells[i][j].path; }

  // NUMA node per device: the NUMA Affinity column, else the groups joined by non-SYS paths.
  std::vector<std::int64_t> sockets() const {
    UnionFind uf(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      for (std::size_t j = 0; j < n_; ++j) {
        if (i != j && path(i, j) != Path::sys && path(i, j) != Path::nvlink) uf.join(i, j);
        if (m_.numa[i] && m_.numa[j] && *m_.numa[i] == *m_.numa[j]) uf.join(i, j);
      }
    }
    return group_ids(uf, n_);
  }

  // A device with no NUMA column whose every relation is NVLink or SYS says nothing about
  // its own socket: place it on the first socket and say so.
  void place_unknown_devices(std::vector<std::int64_t>& socket) {
    for (std::size_t i = 0; i < n_; ++i) {
      bool known = m_.numa[i].has_value();
      for (std::size_t j = 0; j < n_ && !known; ++j) {
        known = i != j && path(i, j) != Path::nvlink && path(i, j) != Path::sys;
      }
      if (known) continue;
      socket[i] = 0;
      t_.assumptions.push_back(m_.labels[i] + ": no PCIe or NUMA information, placed on cpu0");
    }
    // Renumber densely after the moves.
    std::map<std::int64_t, std::int64_t> ids;
    for (auto& s : socket)
      s = ids.emplace(s, static_cast<std::int64_t>(ids.size())).first->second;
  }

  std::vector<std::int64_t> switches() const {
    UnionFind uf(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      for (std::size_t j = 0; j < n_; ++j) {
        if (i != j && (path(i, j) == Path::pix || path(i, j) == Path::pxb)) uf.join(i, j);
      }
    }
    return group_ids(uf, n_);
  }

  void add_devices(const std::vector<std::int64_t>& socket, const std::vector<std::int64_t>& sw) {
    const auto sockets = *std::max_element(socket.begin(), socket.end()) + 1;
    for (std::int64_t s = 0; s < sockets; ++s) {
      t_.devices.push_back({"cpu" + std::to_string(s), DeviceKind::cpu, t_.origin});
      for (std::int64_t o = 0; o < s; ++o) {
        link("cpu" + std::to_string(o), "cpu" + std::to_string(s), a_.socket_class, 1);
      }
    }
    if (sockets > 1) t_.assumptions.push_back("socket link assumed " + a_.socket_class);
    std::map<std::int64_t, std::int64_t> members;
    for (std::size_t i = 0; i < n_; ++i)
      ++members[sw[i]];
    std::set<std::int64_t> made;
    for (std::size_t i = 0; i < n_; ++i) {
      const std::string id = device_id(i);
      t_.devices.push_back({id, is_gpu(i) ? DeviceKind::gpu : DeviceKind::nic, t_.origin});
      const std::string cpu = "cpu" + std::to_string(socket[i]);
      if (members[sw[i]] == 1) {
        link(id, cpu, a_.pcie_class, 1);
        continue;
      }
      const std::string sw_id = "sw" + std::to_string(sw[i]);
      if (made.insert(sw[i]).second) {
        t_.devices.push_back({sw_id, DeviceKind::pcie_switch, t_.origin});
        link(sw_id, cpu, a_.pcie_class, 1);
      }
      link(id, sw_id, a_.pcie_class, 1);
    }
  }

  std::string device_id(std::size_t i) const {
    return is_gpu(i) ? "gpu" + m_.labels[i].substr(3) : "nic:" + m_.labels[i];
  }

  void add_nvlinks() {
    std::vector<std::size_t> gpus;
    for (std::size_t i = 0; i < n_; ++i) {
      if (is_gpu(i)) gpus.push_back(i);
    }
    std::set<std::int64_t> counts;
    bool complete = gpus.size() >= 2;
    for (const auto i : gpus) {
      for (const auto j : gpus) {
        if (i == j) continue;
        if (path(i, j) == Path::nvlink) {
          counts.insert(m_.cells[i][j].nvlinks);
        } else {
          complete = false;
        }
      }
    }
    if (counts.empty()) return;
    // Every pair on the same NV#: an NVSwitch, unless a GPU could really have that many
    // direct links (at most 18, on Hopper): 4 A100 with NV4 between each pair are a mesh.
    const auto others = static_cast<std::int64_t>(gpus.size()) - 1;
    const bool switched = complete && counts.size() == 1 && *counts.begin() * others > 18;
    if (switched) {
      const auto per_gpu = *counts.begin();
      const auto cls = nvlink_class_for(per_gpu, a_);
      t_.devices.push_back({"nvswitch", DeviceKind::nvswitch, t_.origin});
      for (const auto i : gpus)
        link(device_id(i), "nvswitch", cls, per_gpu);
      t_.assumptions.push_back("NV" + std::to_string(per_gpu) +
                               " between every GPU pair read as an NVSwitch with " +
                               std::to_string(per_gpu) + " " + cls + " links per GPU");
      return;
    }
    std::int64_t most = 0;
    for (const auto i : gpus) {
      std::int64_t total = 0;
      for (const auto j : gpus)
        total += i != j && path(i, j) == Path::nvlink ? m_.cells[i][j].nvlinks : 0;
      most = std::max(most, total);
    }
    const auto cls = nvlink_class_for(most, a_);
    for (const auto i : gpus) {
      for (const auto j : gpus) {
        if (i < j && path(i, j) == Path::nvlink) {
          link(device_id(i), device_id(j), cls, m_.cells[i][j].nvlinks);
        }
      }
    }
    t_.assumptions.push_back("direct NVLinks assumed " + cls);
  }

  void link(const std::string& from, const std::string& to, const std::string& cls,
            std::int64_t count) {
    LinkSpec l;
    l.from = from;
    l.to = to;
    l.link_class = cls;
    l.count = count;
    l.where = t_.origin;
    t_.links.push_back(l);
  }

  const Matrix& m_;
  const SmiAssumptions& a_;
  std::size_t n_;
  NodeTemplate t_;
};

}  // namespace

NodeTemplate parse_nvidia_smi_topo(std::string_view text, const std::string& origin,
                                   const SmiAssumptions& assume) {
  const Matrix m = SmiParser(text, origin).parse();
  if (std::none_of(m.labels.begin(), m.labels.end(), is_gpu_label)) {
    throw Error(origin + ": nvidia-smi topo -m: no GPU columns");
  }
  return SmiGraphBuilder(m, assume, origin).build();
}

}  // namespace dtplan
