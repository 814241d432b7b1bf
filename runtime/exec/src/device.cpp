// Device memory accounting shared by the backends: every allocation is charged to a named
// component; the peak total and its split by component are kept.
#include "dtplan/runtime/device.hpp"

#include <sstream>

#include "dtplan/model/error.hpp"

namespace dtplan::runtime {

std::string_view name_of(MemoryComponent c) {
  switch (c) {
    case MemoryComponent::weights:
      return "weights";
    case MemoryComponent::gradients:
      return "gradients";
    case MemoryComponent::optimizer_states:
      return "optimizer_states";
    case MemoryComponent::activations:
      return "activations";
    case MemoryComponent::buffers:
      return "buffers";
    case MemoryComponent::data:
      return "data";
  }
  return "?";
}

std::int64_t MemoryUse::total() const {
  std::int64_t t = 0;
  for (auto b : bytes)
    t += b;
  return t;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = o.owner_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    component_ = o.component_;
    o.owner_ = nullptr;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void Buffer::reset() {
  if (owner_ != nullptr && data_ != nullptr) owner_->release(data_, bytes_, component_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

namespace {

std::string gib(std::int64_t bytes) {
  std::ostringstream s;
  s.precision(3);
  s << static_cast<double>(bytes) / 1073741824.0 << " GiB";
  return s.str();
}

std::string out_of_memory(const Device& d, std::int64_t bytes, MemoryComponent c,
                          const std::string& why) {
  std::ostringstream s;
  s << "out of memory on " << d.kind() << ": allocating " << gib(bytes) << " for " << name_of(c)
    << " " << why << "; in use " << gib(d.in_use().total()) << " of " << gib(d.capacity_bytes())
    << " (";
  for (int i = 0; i < kMemoryComponents; ++i) {
    const auto comp = static_cast<MemoryComponent>(i);
    s << (i ? ", " : "") << name_of(comp) << " " << gib(d.in_use()[comp]);
  }
  s << ")";
  return s.str();
}

}  // namespace

Buffer Device::allocate(std::int64_t bytes, MemoryComponent c) {
  if (bytes < 0) throw Error("negative allocation for " + std::string(name_of(c)));
  if (bytes == 0) return {};
  if (in_use_.total() + bytes > capacity_bytes_) {
    throw Error(out_of_memory(*this, bytes, c, "would pass the capacity"));
  }
  void* p = raw_allocate(bytes);
  if (p == nullptr) throw Error(out_of_memory(*this, bytes, c, "failed in the allocator"));
  in_use_[c] += bytes;
  if (in_use_.total() > at_peak_.total()) at_peak_ = in_use_;
  return Buffer(this, p, bytes, c);
}

void Device::release(void* p, std::int64_t bytes, MemoryComponent c) {
  raw_free(p);
  in_use_[c] -= bytes;
}

}  // namespace dtplan::runtime
