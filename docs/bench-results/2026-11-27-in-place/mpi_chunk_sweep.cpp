#include <mpi.h>
#include <vector>
#include <algorithm>
#include <cstdio>
int main(int argc,char**argv){
  MPI_Init(&argc,&argv); int r; MPI_Comm_rank(MPI_COMM_WORLD,&r);
  size_t total_max = size_t(64)<<20;
  std::vector<float> buf(total_max/4, 1.f);
  for (size_t total : {size_t(1)<<20, size_t(4)<<20, size_t(9)<<20, size_t(16)<<20, size_t(64)<<20}) {
    for (size_t chunk : {size_t(512)<<10, size_t(1)<<20, size_t(2)<<20, size_t(4)<<20, size_t(8)<<20, size_t(16)<<20, size_t(64)<<20}) {
      if (chunk > total && chunk != (size_t(64)<<20)) continue;
      int iters = total >= (size_t(16)<<20) ? 8 : 40;
      std::vector<double> t;
      for (int it=0; it<iters; ++it) {
        MPI_Barrier(MPI_COMM_WORLD);
        double s=MPI_Wtime();
        for (size_t at=0; at<total; at+=chunk) {
          size_t n = std::min(chunk, total-at)/4;
          MPI_Allreduce(MPI_IN_PLACE, buf.data()+at/4, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        t.push_back(MPI_Wtime()-s);
      }
      std::sort(t.begin(),t.end());
      if(!r) printf("total %5zu KiB chunk %6zu KiB: %8.1f us  %.2f GB/s alg\n", total>>10, std::min(chunk,total)>>10, t[t.size()/2]*1e6, total/t[t.size()/2]/1e9);
    }
  }
  MPI_Finalize();
}
