// The CPU runtime's collectives against Open MPI's own, side by side in one run (issue 18).
//
//   mpirun -np 2 build/bin/bench_runtime_collectives [--rounds 15] [--max-bytes 16777216]
//
// For each collective and size, rounds alternate between the runtime's Communicator (issue,
// then wait: what the trainer does) and the same MPI blocking collective called directly. A
// round times a batch of calls between barriers; its time is the slowest rank's mean per call.
// Rank 0 prints the medians over rounds, their ratio, and the median duration the runtime
// recorded for its own calls (which should match the runtime's time per call). Google
// Benchmark is not used: its iteration count is chosen per process, and collectives need
// every rank to make the same number of calls.
#include <mpi.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dtplan/runtime/communicator.hpp"
#include "dtplan/runtime/mpi_group.hpp"

namespace {

using dtplan::runtime::Collective;
using dtplan::runtime::Communicator;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Buffers {
  std::vector<float> in, out;
  std::int64_t count = 0;  // elements of the whole (unscattered / gathered) buffer
};

// One call of `kind` through the runtime's communicator, issued and waited.
void runtime_call(Communicator& c, Collective kind, Buffers& b) {
  const std::int64_t n = b.count, per_rank = n / c.size();
  float* in = b.in.data();
  float* out = b.out.data();
  dtplan::runtime::CommHandle h = 0;
  switch (kind) {
    case Collective::all_reduce:
      h = c.all_reduce(in, n);
      break;
    case Collective::reduce_scatter:
      h = c.reduce_scatter(in, out, per_rank);
      break;
    case Collective::all_gather:
      h = c.all_gather(in, out, per_rank);
      break;
    case Collective::broadcast:
      h = c.broadcast(in, n, 0);
      break;
    case Collective::reduce:
      h = c.reduce(in, n, 0);
      break;
    case Collective::send_recv: {  // a ring shift
      const int r = c.rank(), size = c.size();
      h = c.send_recv(in, n, (r + 1) % size, out, n, (r + size - 1) % size);
      break;
    }
  }
  c.wait(h);
}

// The same collective as Open MPI's blocking call, with the same in-place choices.
void mpi_call(MPI_Comm comm, int rank, int size, Collective kind, Buffers& b) {
  const int n = static_cast<int>(b.count), per_rank = n / size;
  float* in = b.in.data();
  float* out = b.out.data();
  switch (kind) {
    case Collective::all_reduce:
      MPI_Allreduce(MPI_IN_PLACE, in, n, MPI_FLOAT, MPI_SUM, comm);
      break;
    case Collective::reduce_scatter:
      MPI_Reduce_scatter_block(in, out, per_rank, MPI_FLOAT, MPI_SUM, comm);
      break;
    case Collective::all_gather:
      MPI_Allgather(in, per_rank, MPI_FLOAT, out, per_rank, MPI_FLOAT, comm);
      break;
    case Collective::broadcast:
      MPI_Bcast(in, n, MPI_FLOAT, 0, comm);
      break;
    case Collective::reduce:
      MPI_Reduce(rank == 0 ? MPI_IN_PLACE : in, rank == 0 ? in : nullptr, n, MPI_FLOAT, MPI_SUM, 0,
                 comm);
      break;
    case Collective::send_recv:
      MPI_Sendrecv(in, n, MPI_FLOAT, (rank + 1) % size, 17, out, n, MPI_FLOAT,
                   (rank + size - 1) % size, 17, comm, MPI_STATUS_IGNORE);
      break;
  }
}

// Mean seconds per call of `calls` calls, the slowest rank's.
double timed_batch(MPI_Comm comm, int calls, const std::function<void()>& fn) {
  MPI_Barrier(comm);
  const double start = now_s();
  for (int i = 0; i < calls; ++i)
    fn();
  double mine = (now_s() - start) / calls, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
  return slowest;
}

struct Options {
  int rounds = 15;
  std::int64_t max_bytes = 16 << 20;
};

constexpr const char* kUsage =
    "usage: mpirun -np N bench_runtime_collectives [--rounds R] [--max-bytes B]\n"
    "  --rounds R      alternated rounds per row, a whole number >= 1 (default 15)\n"
    "  --max-bytes B   largest message in bytes, a whole number >= 1024 (default 16777216)\n";

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "bench_runtime_collectives: %s\n%s", what.c_str(), kUsage);
  std::exit(2);
}

// A whole number of at least `least` from a flag's value, or an error naming both.
std::int64_t whole_number(const std::string& flag, const char* text, std::int64_t least) {
  std::int64_t v = 0;
  const std::string_view s(text);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    usage_error(flag + ": '" + std::string(s) + "' is not a whole number");
  }
  if (v < least) usage_error(flag + ": " + std::string(s) + " is below " + std::to_string(least));
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf("%s", kUsage);
      std::exit(0);
    }
    if (flag != "--rounds" && flag != "--max-bytes") usage_error("unknown flag '" + flag + "'");
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const char* value = argv[++i];
    if (flag == "--rounds") {
      o.rounds = static_cast<int>(whole_number(flag, value, 1));
      if (o.rounds > 100000) usage_error("--rounds: " + std::string(value) + " is above 100000");
    } else {
      o.max_bytes = whole_number(flag, value, 1024);
    }
  }
  return o;
}

void run(const Options& o) {
  auto world = dtplan::runtime::MpiGroup::world();
  auto comm = world.make_communicator();
  const int rank = world.rank(), size = world.size();
  if (rank == 0) {
    std::printf("%d ranks, %s, %d alternated rounds per row\n", size, comm->description().c_str(),
                o.rounds);
    std::printf("%-15s %10s %12s %12s %8s %12s\n", "collective", "bytes", "runtime_us", "mpi_us",
                "ratio", "recorded_us");
  }
  const Collective kinds[] = {Collective::all_reduce, Collective::reduce_scatter,
                              Collective::all_gather, Collective::broadcast, Collective::reduce};
  for (const auto kind : kinds) {
    for (std::int64_t bytes = 1024; bytes <= o.max_bytes; bytes *= 4) {
      Buffers b;
      b.count = bytes / 4 / size * size;
      b.in.assign(static_cast<std::size_t>(b.count), 1.0f);
      b.out.assign(static_cast<std::size_t>(b.count), 0.0f);
      // About 20 ms of calls per batch, at least 3, from a first timing.
      const double first = timed_batch(world.handle(), 1, [&] { runtime_call(*comm, kind, b); });
      int calls = static_cast<int>(std::clamp(0.02 / std::max(first, 1e-7), 3.0, 2000.0));
      MPI_Bcast(&calls, 1, MPI_INT, 0, world.handle());
      std::vector<double> ours, theirs, recorded;
      for (int r = 0; r < o.rounds; ++r) {
        comm->clear_records();
        ours.push_back(timed_batch(world.handle(), calls, [&] { runtime_call(*comm, kind, b); }));
        for (const auto& rec : comm->records())
          recorded.push_back(rec.time_s);
        theirs.push_back(timed_batch(world.handle(), calls,
                                     [&] { mpi_call(world.handle(), rank, size, kind, b); }));
      }
      if (rank == 0) {
        const double a = median(ours), m = median(theirs);
        std::printf("%-15s %10lld %12.2f %12.2f %8.3f %12.2f\n",
                    std::string(dtplan::runtime::name_of(kind)).c_str(),
                    static_cast<long long>(b.count) * 4, a * 1e6, m * 1e6, a / m,
                    median(recorded) * 1e6);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);  // before MPI starts: a bad flag needs no job to end
  dtplan::runtime::MpiSession session(&argc, &argv);
  run(o);
  return 0;
}
