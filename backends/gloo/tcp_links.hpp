#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace troupe::elastic {
class store_client;
}

namespace troupe::backends {

/// Bytes to or from one member in tcp_links::exchange().
struct link_piece {
  const void* send = nullptr;
  size_t send_bytes = 0;
  void* recv = nullptr;
  size_t recv_bytes = 0;
  /// A message goes to this member (an empty one where send_bytes is 0).
  bool sends = true;
  /// A message comes from this member.
  bool receives = true;
};

/// A member a call neither sends to nor hears from.
inline constexpr link_piece no_message{nullptr, 0, nullptr, 0, false, false};

/// A TCP connection of our own to other members of a Gloo-mode set, for
/// its exchanges: to every other member (a mesh), or in a larger set to
/// its ring neighbours only (two connections a rank, whatever the set's
/// size, where a mesh would double Gloo's n - 1). Gloo's transport hands
/// every message through its network thread and announces every receive
/// before the data may leave: one 4-byte exchange between 2 ranks over
/// loopback took 85-92 us through Gloo's unbound buffers, 4-7 us as a
/// write and a read on a socket of the calling thread's
/// (bench/raw_peers.cpp's peer, swapped in turn, 2026-11-29). No CAF, no
/// Gloo.
class tcp_links {
public:
  enum class shape { mesh, ring };

  /// Connects rank `rank` of `size` to the members the shape links it
  /// with: each listens on `host`, port 0, and tells each linked higher
  /// rank, through the store under `prefix` (elastic::all_to_all), its
  /// address and a random token meant for that rank only; each higher rank
  /// connects and presents its rank and the token. A connection that does
  /// not do so within a second is closed. Throws backend_error when
  /// `timeout` passes first. With `polls` (the host's ranks have cores of
  /// their own), a call of small messages looks again for a while before
  /// it sleeps.
  tcp_links(elastic::store_client& store, const std::string& prefix, int rank, int size,
            const std::string& host, std::chrono::milliseconds timeout,
            shape links = shape::mesh, bool polls = false);
  ~tcp_links();
  tcp_links(const tcp_links&) = delete;
  tcp_links& operator=(const tcp_links&) = delete;

  /// Whether this rank has a link to `member` (never to itself).
  bool linked(int member) const {
    return member >= 0 && member < size_ && fds_[static_cast<size_t>(member)] >= 0;
  }

  /// Sends `pieces[m].send` to every other member m and receives exactly
  /// `pieces[m].recv_bytes` from it, where the piece says it sends and
  /// receives (this rank's entry is ignored; the members must agree on
  /// who sends whom what, and may name linked members only). Each message carries its length, so a member
  /// that sent another size is named, and its number on its link, which
  /// the receiver checks against its own count.
  /// Throws backend_error on such a message, a closed link, `timeout`
  /// with no byte moving either way, or abort(); after that every call throws: a link's byte stream is no
  /// longer in step. Not for concurrent calls.
  void exchange(const std::vector<link_piece>& pieces, std::chrono::milliseconds timeout);

  /// Where each member's message goes, by member, given the bytes each
  /// sends this one (0 for members it hears nothing from).
  using placement = std::function<std::vector<void*>(const std::vector<size_t>& bytes)>;

  /// As exchange(), but a message is as long as its sender says: once
  /// every member this rank receives from has sent its header, `place`
  /// says where the payloads go (the pieces' recv and recv_bytes are not
  /// read). One exchange where a receiver would otherwise first have to
  /// learn the sizes in one of its own.
  void exchange_sized_by_senders(const std::vector<link_piece>& pieces,
                                 std::chrono::milliseconds timeout, const placement& place);

  /// From any thread: wakes exchange() and fails it and every later call.
  void abort();

  /// On the exchanging thread, once another transport of the set failed:
  /// shuts every link, so that a peer waiting on this rank learns at once,
  /// and fails every later call with `why` (an earlier failure's text
  /// stays).
  void shut(const std::string& why);

private:
  void fail(const std::string& why);
  void close_all();
  void run(std::vector<link_piece> pieces, std::chrono::milliseconds timeout,
           const placement* place);

  int rank_;
  int size_;
  bool polls_;
  std::vector<int> fds_;  // by member; -1 for this rank and unlinked members
  int wake_fd_ = -1;      // an eventfd abort() writes
  std::atomic<bool> aborted_{false};
  std::string failure_;  // set by the exchanging thread only
  // Messages sent to / received from each member so far.
  std::vector<uint64_t> sent_;
  std::vector<uint64_t> received_;
};

} // namespace troupe::backends
