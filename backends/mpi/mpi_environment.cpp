#include "backends/mpi/mpi_environment.hpp"

#include <atomic>
#include <cstdlib>
#include <numeric>

#include <unistd.h>

#include <mpi.h>
#include <spdlog/spdlog.h>

#include "backends/communicator.hpp"

namespace troupe::backends {

namespace {

const char* thread_level_name(int level) {
  switch (level) {
  case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
  case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
  case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
  case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown thread level";
}

std::atomic<bool> peer_lost{false};
// The process that called MPI_Init: a child fork()ed from it after init
// inherits the exit handler, and must leave the parent's MPI alone.
pid_t initialized_in = 0;

void finalize_at_exit() {
  if (::getpid() != initialized_in)
    return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  if (peer_lost.load()) {
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    spdlog::critical("mpi: rank {} lost a peer; MPI cannot finalize without it, so this rank "
                     "ends the job with MPI_Abort instead of waiting for ever",
                     rank);
    spdlog::default_logger()->flush();
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}

} // namespace

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw backend_error(std::string("mpi ") + what + " failed: " +
                      std::string(text, static_cast<size_t>(len)));
}

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

void ensure_mpi_initialized(bool serialized) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    return;
  const int wanted = serialized ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE;
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, wanted, &provided), "MPI_Init_thread");
  initialized_in = ::getpid();
  std::atexit(finalize_at_exit);
  // Errors come back as codes (turned into backend_error), not aborts.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  // Below SERIALIZED, calls from a backend thread are not allowed at all;
  // below MULTIPLE, two sets' backend threads may not call at once.
  if (provided < wanted)
    throw backend_error(
      std::string("MPI_Init_thread asked for ") + thread_level_name(wanted) + " and got " +
      thread_level_name(provided) +
      (serialized ? ": Troupe calls MPI from a backend thread, not the one that started it"
                  : ": Troupe runs each process set's collectives on a thread of its own; "
                    "TROUPE_MPI_THREADS_DISABLE=1 (HOROVOD_MPI_THREADS_DISABLE) asks for "
                    "MPI_THREAD_SERIALIZED and runs only the global process set on MPI"));
}

namespace {

// Asked of Open MPI itself (MPI_T): the user's variable, a parameter file
// or mpirun (when it oversubscribes) may have set it. MPI must be running.
bool read_yield_when_idle() {
  // Open MPI's MPI_T_init_thread overwrites the level MPI_Query_thread
  // reports afterwards: ask for the one MPI runs with.
  int level = MPI_THREAD_SINGLE, provided = 0;
  MPI_Query_thread(&level);
  if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS)
    return false;
  int yields = 0;
  int index = 0;
  if (MPI_T_cvar_get_index("mpi_yield_when_idle", &index) == MPI_SUCCESS) {
    MPI_T_cvar_handle handle;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
      if (count == 1)
        MPI_T_cvar_read(handle, &yields);
      MPI_T_cvar_handle_free(&handle);
    }
  }
  MPI_T_finalize();
  return yields != 0;
}

} // namespace

void end_with_mpi_abort_at_exit() {
  peer_lost.store(true);
}

bool mpi_yields_when_idle() {
  if (!mpi_initialized())
    return false;
  static const bool yields = read_yield_when_idle();  // fixed once MPI runs
  return yields;
}

bool mpi_initialized() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

bool mpi_concurrent_threads() {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  return level == MPI_THREAD_MULTIPLE;
}

rank_layout mpi_world_identity(bool serialized) {
  ensure_mpi_initialized(serialized);
  rank_layout id;
  MPI_Comm_rank(MPI_COMM_WORLD, &id.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &id.size);
  MPI_Comm local;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local),
        "MPI_Comm_split_type");
  MPI_Comm_rank(local, &id.local_rank);
  MPI_Comm_size(local, &id.local_size);
  MPI_Comm_free(&local);
  MPI_Comm cross;
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, id.local_rank, id.rank, &cross), "MPI_Comm_split");
  MPI_Comm_rank(cross, &id.cross_rank);
  MPI_Comm_size(cross, &id.cross_size);
  MPI_Comm_free(&cross);
  return id;
}

std::vector<std::string> mpi_allgather_strings(const std::string& mine) {
  ensure_mpi_initialized();
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(size));
  check_mpi(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD),
        "MPI_Allgather");
  std::vector<int> offsets(static_cast<size_t>(size), 0);
  std::partial_sum(lens.begin(), lens.end() - 1, offsets.begin() + 1);
  std::string all(static_cast<size_t>(offsets.back() + lens.back()), '\0');
  check_mpi(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(),
                       MPI_CHAR, MPI_COMM_WORLD),
        "MPI_Allgatherv");
  std::vector<std::string> out;
  for (size_t r = 0; r < lens.size(); ++r)
    out.push_back(all.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(lens[r])));
  return out;
}

} // namespace troupe::backends
