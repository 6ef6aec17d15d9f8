// libFuzzer target: the rendezvous store's wire format as the server meets
// it (elastic/store_protocol.*): frame boundaries in a byte stream, then
// every complete frame's body as a request. Malformed input must end in
// protocol_error, never in a crash, a hang or an oversized allocation.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "elastic/store_protocol.hpp"

namespace protocol = troupe::elastic::protocol;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view stream{reinterpret_cast<const char*>(data), size};
  try {
    // Frames back to back, as the server cuts them from its input buffer.
    while (const size_t n = protocol::frame_size(stream)) {
      try {
        protocol::decode_request(stream.substr(protocol::header_size, n - protocol::header_size));
      } catch (const protocol::protocol_error&) {
        // the server answers error + message and goes on
      }
      stream.remove_prefix(n);
    }
  } catch (const protocol::protocol_error&) {
    // oversized length: the server drops the connection
  }
  return 0;
}
