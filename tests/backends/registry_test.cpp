// What the registry answers about GPUs; runs on machines without one.
#include "backends/registry.hpp"

#include <cstdlib>

#include <gtest/gtest.h>

namespace troupe::backends {
namespace {

// TROUPE_TEST_CUDA_BUILT / TROUPE_TEST_NCCL_BUILT: what CMake configured
// (tests/CMakeLists.txt).
TEST(registry, says_what_this_build_has) {
  EXPECT_EQ(cuda_built(), TROUPE_TEST_CUDA_BUILT != 0);
  EXPECT_EQ(nccl_built(), TROUPE_TEST_NCCL_BUILT != 0);
  EXPECT_EQ(nccl_version() != 0, nccl_built());
}

TEST(registry, a_cuda_tensor_without_a_visible_gpu_is_refused_with_the_reason) {
  // Before the first CUDA call of this process (ctest runs each test alone).
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  const auto missing = missing_backend(device_kind::cuda);
  if (cuda_built())
    EXPECT_EQ(missing.rfind("no CUDA device is visible to this process", 0), 0u) << missing;
  else
    EXPECT_EQ(missing, "this build has no GPU backend (NCCL: TROUPE_WITH_NCCL)");
  EXPECT_EQ(missing_backend(device_kind::cpu), "");
}

TEST(registry, cuda_tensors_get_nccl_where_built_else_the_cpu_backend) {
  backend_context one;  // a set of one: no store needed
  auto made = make_set_backends(one, {});
  ASSERT_TRUE(made.cpu);
  if (nccl_built()) {
    ASSERT_TRUE(made.gpu);
    EXPECT_STREQ(made.gpu->name(), "nccl");
    EXPECT_FALSE(made.gpu_on_cpu);
  } else {
    EXPECT_FALSE(made.gpu);
    EXPECT_EQ(made.gpu_on_cpu, cuda_built());
  }
  auto staged = make_set_backends(one, {"", "gloo"});
  EXPECT_FALSE(staged.gpu);
  EXPECT_EQ(staged.gpu_on_cpu, cuda_built());
}

TEST(registry, nccl_that_cannot_be_had_is_an_error_naming_why) {
  backend_context two;
  two.size = 2;  // no store: as under a plain mpirun
  try {
    make_set_backends(two, {"mpi", "nccl"});
    FAIL() << "expected backend_error";
  } catch (const backend_error& e) {
    const std::string why = e.what();
    EXPECT_NE(why.find(nccl_built() ? "needs troupe-run's store" : "has no NCCL backend"),
              std::string::npos)
      << why;
  }
}

} // namespace
} // namespace troupe::backends
