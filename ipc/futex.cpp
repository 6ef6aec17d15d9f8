#include "ipc/futex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace troupe::ipc {

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected,
                std::chrono::nanoseconds for_at_most) {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(for_at_most);
  timespec ts{static_cast<time_t>(s.count()), static_cast<long>((for_at_most - s).count())};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
            0);
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

} // namespace troupe::ipc
