#include <mpi.h>
#include <memory>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#include <algorithm>
#include "backends/shm/shm_group.hpp"
#include "backends/gloo/gloo_reduction.hpp"
using namespace troupe::backends;
using clk = std::chrono::steady_clock;
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  size_t slot = (argc > 1 ? atol(argv[1]) : 256) << 10;
  char name[256] = {0};
  std::unique_ptr<shm_group> g;
  if (rank == 0) {
    auto s = shm_group::create_segment("/troupe-bench-x" + std::to_string(getpid()), 2, slot);
    strcpy(name, s.name().c_str());
    MPI_Bcast(name, 256, MPI_CHAR, 0, MPI_COMM_WORLD);
    g = std::make_unique<shm_group>(std::move(s), 0, 2, std::chrono::milliseconds(10000));
  } else {
    MPI_Bcast(name, 256, MPI_CHAR, 0, MPI_COMM_WORLD);
    g = std::make_unique<shm_group>(shm_segment::open(name, shm_group::segment_bytes(2, slot)), 1, 2, std::chrono::milliseconds(10000));
  }
  auto red = reduction_of(troupe::data_type::float32, troupe::reduce_op::sum);
  for (size_t kib : {4, 64, 1024, 4096, 9216, 65536}) {
    size_t n = kib * 256;
    std::vector<float> a(n, 1.0f);
    int iters = std::max<size_t>(5, 200000 / (kib + 50));
    for (int mode = 0; mode < 2; ++mode) {
      std::vector<double> ts;
      for (int i = 0; i < iters; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        auto t0 = clk::now();
        if (mode == 0) MPI_Allreduce(MPI_IN_PLACE, a.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else g->allreduce(a.data(), n, 4, red, {});
        ts.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
        if (a[0] > 1e30) std::fill(a.begin(), a.end(), 1.0f);
      }
      std::sort(ts.begin(), ts.end());
      if (rank == 0) printf("%6zu KiB %s median %9.1f us  %.2f GB/s\n", kib, mode ? "shm" : "mpi", ts[ts.size()/2], kib*1024.0/ts[ts.size()/2]/1e3);
    }
  }
  g.reset();
  MPI_Finalize();
}
