#include "bench/troupe_contender.hpp"

#include <stdexcept>

#include "troupe/troupe.hpp"

namespace troupe::bench {

namespace {

class troupe_contender : public contender {
public:
  explicit troupe_contender(std::string backend) : backend_(std::move(backend)) {
  }
  std::string label() const override {
    return "troupe-" + backend_;
  }
  // Everything in flight before the first wait, as a training loop's
  // gradient hooks do: this is where fusion and the cache can help.
  void allreduce_all(const std::vector<buffer_view>& buffers) override {
    handles_.clear();
    for (const auto& b : buffers) {
      const tensor t{b.data, b.float16 ? data_type::float16 : data_type::float32,
                     {static_cast<int64_t>(b.count)}};
      handles_.push_back(allreduce(t, t, b.name));
    }
    for (const auto& h : handles_)
      if (auto s = h.wait(); !s.ok())
        throw std::runtime_error("troupe allreduce failed: " + s.message());
  }

private:
  std::string backend_;
  std::vector<handle> handles_;
};

} // namespace

std::unique_ptr<contender> make_troupe_contender(const std::string& backend) {
  return std::make_unique<troupe_contender>(backend);
}

} // namespace troupe::bench
