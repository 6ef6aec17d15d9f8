// shm_group::allreduce against MPI_Allreduce in two MPI processes.
//   shm_vs_mpi SLOT_KIB                  one hot float32 buffer per size
//   shm_vs_mpi SLOT_KIB resnet [CHUNK]   the 161 ResNet-50 gradients one by one
//                                        (MPI in CHUNK KiB calls when given)
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/arith.hpp"
#include "backends/shm/shm_group.hpp"
using namespace troupe::backends;
using clk = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void mpi_allreduce(float* data, size_t n, size_t chunk) {
  if (chunk == 0)
    chunk = n;
  for (size_t o = 0; o < n; o += chunk)
    MPI_Allreduce(MPI_IN_PLACE, data + o, static_cast<int>(std::min(chunk, n - o)), MPI_FLOAT,
                  MPI_SUM, MPI_COMM_WORLD);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const size_t slot = (argc > 1 ? atol(argv[1]) : 256) << 10;
  const bool resnet = argc > 2 && std::string(argv[2]) == "resnet";
  const size_t chunk = (static_cast<size_t>(argc > 3 ? atol(argv[3]) : 0) << 10) / sizeof(float);
  char name[256] = {0};
  std::unique_ptr<shm_group> g;
  if (rank == 0) {
    auto s = shm_group::create_segment("/troupe-bench-x" + std::to_string(getpid()), 2, slot);
    strcpy(name, s.name().c_str());
    MPI_Bcast(name, 256, MPI_CHAR, 0, MPI_COMM_WORLD);
    g = std::make_unique<shm_group>(std::move(s), 0, 2, std::chrono::milliseconds(10000));
  } else {
    MPI_Bcast(name, 256, MPI_CHAR, 0, MPI_COMM_WORLD);
    g = std::make_unique<shm_group>(shm_segment::open(name, shm_group::segment_bytes(2, slot)),
                                    1, 2, std::chrono::milliseconds(10000));
  }
  const auto red = reduction_of(troupe::data_type::float32, troupe::reduce_op::sum);
  const auto timed = [&](auto&& step) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = clk::now();
    step();
    return std::chrono::duration<double, std::micro>(clk::now() - t0).count();
  };
  if (resnet) {
    std::ifstream f("bench/data/resnet50_gradients.txt");
    std::string line;
    std::vector<std::vector<float>> ts;
    while (std::getline(f, line))
      if (line[0] != '#')
        ts.emplace_back(atol(line.c_str()), 1.0f);
    std::vector<double> t[2];
    for (int it = 0; it < 40; ++it) {
      const int mode = it % 2;
      t[mode].push_back(timed([&] {
        for (auto& v : ts)
          mode == 0 ? mpi_allreduce(v.data(), v.size(), chunk)
                    : g->allreduce(v.data(), v.size(), 4, red, {});
      }));
      for (auto& v : ts)
        std::fill(v.begin(), v.end(), 1.0f);
    }
    if (rank == 0)
      printf("mpi step median %.2f ms\nshm step median %.2f ms\n", median(t[0]) / 1e3,
             median(t[1]) / 1e3);
  } else {
    for (size_t kib : {4, 64, 1024, 4096, 9216, 65536}) {
      std::vector<float> a(kib * 256, 1.0f);
      const int iters = static_cast<int>(std::max<size_t>(5, 200000 / (kib + 50)));
      for (int mode = 0; mode < 2; ++mode) {
        std::vector<double> ts;
        for (int i = 0; i < iters; ++i) {
          ts.push_back(timed([&] {
            mode == 0 ? mpi_allreduce(a.data(), a.size(), 0)
                      : g->allreduce(a.data(), a.size(), 4, red, {});
          }));
          if (a[0] > 1e30)
            std::fill(a.begin(), a.end(), 1.0f);
        }
        if (rank == 0)
          printf("%6zu KiB %s median %9.1f us  %.2f GB/s\n", kib, mode ? "shm" : "mpi",
                 median(ts), kib * 1024.0 / median(ts) / 1e3);
      }
    }
  }
  g.reset();
  MPI_Finalize();
}
