#include <mpi.h>
#include <vector>
#include <algorithm>
#include <cstring>
#include <cstdio>
int main(int argc,char**argv){
  MPI_Init(&argc,&argv); int r; MPI_Comm_rank(MPI_COMM_WORLD,&r);
  for (size_t sz : {size_t(4)<<10, size_t(16)<<10, size_t(32)<<10, size_t(64)<<10, size_t(128)<<10, size_t(256)<<10}) {
    int n = 64;
    std::vector<std::vector<float>> ts(n, std::vector<float>(sz/4, 1.f));
    std::vector<float> fb(n*sz/4);
    std::vector<double> a,b;
    for (int it=0; it<60; ++it) {
      MPI_Barrier(MPI_COMM_WORLD);
      double s=MPI_Wtime();
      for (auto& t: ts) MPI_Allreduce(MPI_IN_PLACE, t.data(), sz/4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double m=MPI_Wtime();
      MPI_Barrier(MPI_COMM_WORLD);
      double s2=MPI_Wtime();
      size_t chunkf = (size_t(1)<<20)/4;
      // pack in 1 MiB pieces
      for (size_t first=0; first<(size_t)n;) {
        size_t per = std::max<size_t>(1, chunkf/(sz/4));
        size_t last = std::min<size_t>(n, first+per);
        float* p=fb.data();
        for (size_t i=first;i<last;++i){ memcpy(p, ts[i].data(), sz); p+=sz/4; }
        MPI_Allreduce(MPI_IN_PLACE, fb.data(), (last-first)*sz/4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        p=fb.data();
        for (size_t i=first;i<last;++i){ memcpy(ts[i].data(), p, sz); p+=sz/4; }
        first=last;
      }
      double e=MPI_Wtime();
      a.push_back(m-s); b.push_back(e-s2);
    }
    std::sort(a.begin(),a.end()); std::sort(b.begin(),b.end());
    if(!r) printf("64 x %4zu KiB: one call each %7.1f us, packed 1 MiB %7.1f us\n", sz>>10, a[30]*1e6, b[30]*1e6);
  }
  MPI_Finalize();
}
