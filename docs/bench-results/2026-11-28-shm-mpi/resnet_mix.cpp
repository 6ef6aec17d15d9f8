#include <mpi.h>
#include <memory>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
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
  size_t chunk = (argc > 2 ? atol(argv[2]) : 0) << 10;
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
  std::ifstream f("bench/data/resnet50_gradients.txt");
  std::string line; std::vector<std::vector<float>> ts;
  while (std::getline(f, line)) { if (line[0]=='#') continue; ts.emplace_back(atol(line.c_str()), 1.0f); }
  std::vector<double> t[2];
  for (int it = 0; it < 40; ++it) {
    int mode = it % 2;
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = clk::now();
    for (auto& v : ts) {
      if (mode == 0) {
        if (chunk == 0) MPI_Allreduce(MPI_IN_PLACE, v.data(), v.size(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else for (size_t o = 0; o < v.size(); o += chunk/4) MPI_Allreduce(MPI_IN_PLACE, v.data()+o, std::min(chunk/4, v.size()-o), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      } else g->allreduce(v.data(), v.size(), 4, red, {});
    }
    t[mode].push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
    for (auto& v : ts) std::fill(v.begin(), v.end(), 1.0f);
  }
  for (int m = 0; m < 2; ++m) { std::sort(t[m].begin(), t[m].end()); if (rank == 0) printf("%s step median %.2f ms\n", m ? "shm" : "mpi", t[m][t[m].size()/2]); }
  g.reset();
  MPI_Finalize();
}
