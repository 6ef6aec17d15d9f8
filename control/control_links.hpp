#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::control {

/// The control connections of a job's ranks (CAF connections between their
/// supervisors, with heartbeats): a full mesh for a job no larger than a
/// star of `fanout` (N - 1 connections each, which is at most `fanout`),
/// else the global set's control tree (`control_tree_node`, host by host),
/// so a rank holds one connection to its parent and at most 2 x fanout to
/// its children, whatever N is. Messages between ranks that are not
/// neighbours are relayed along the tree (CAF's routing, or the
/// supervisors'), so a lost or departed rank cuts the ranks on its other
/// sides off from this one: `connected` says which.
class control_links {
public:
  /// A full mesh of `size` ranks.
  explicit control_links(int32_t size = 1);

  /// The links every rank of a job computes alike: the tree when every
  /// rank named the same fanout (`fanouts`, by rank) and
  /// `control::tree_possible(size, fanout)`, else the mesh. `hosts` by
  /// rank (the tree follows contiguous hosts).
  static control_links plan(const std::vector<int32_t>& fanouts,
                            const std::vector<std::string>& hosts);

  /// The tree given every rank's parent (-1 for rank 0); empty: the mesh of
  /// `size`.
  static control_links from_parents(int32_t size, std::vector<int32_t> parents);

  bool mesh() const { return parents_.empty(); }
  int32_t size() const { return size_; }
  /// Every rank's parent (-1 for rank 0); empty for the mesh.
  const std::vector<int32_t>& parents() const { return parents_; }

  /// The ranks `rank` connects to itself; the others connect to it. Mesh:
  /// the lower ranks, nearest first; tree: its parent.
  std::vector<int32_t> dials(int32_t rank) const;
  /// Every rank `rank` holds a connection to.
  std::vector<int32_t> neighbours(int32_t rank) const;
  /// Whether `a` and `b` (two ranks) hold a connection to each other.
  bool linked(int32_t a, int32_t b) const;

  /// The ranks `rank` must hold a connection of its own to for a process
  /// set of global ranks `members` (ascending) other than the global one:
  /// the set's coordinator (its lowest rank) and its parent in the set's
  /// control tree (same fanout, hosts), unless already a neighbour. Along
  /// the tree CAF routes a message only where a handle of its destination
  /// came from the right side, which holds for the global set (its tree is
  /// these links) but not for the pairs of another set; direct
  /// connections need no route. Empty for a mesh.
  std::vector<int32_t> set_contacts(int32_t rank, const std::vector<int>& members) const;

  /// Whether `a` and `b` can still reach each other when the ranks marked in
  /// `gone` (by rank) are lost or have left: neither is gone, and in a
  /// tree no rank on the path between them is.
  bool connected(int32_t a, int32_t b, const std::vector<bool>& gone) const;

private:
  int32_t size_ = 1;
  int32_t fanout_ = 0;
  std::vector<std::string> hosts_;
  std::vector<int32_t> parents_;
  std::vector<int32_t> depth_;
};

/// A rank's published endpoint, "host:port links=F on=HOST": its
/// control-plane address, the control fanout it was configured with and
/// the host it runs on as its process sets name it (every rank reads every
/// endpoint, so all plan the same links, and the links are the global
/// set's control tree).
struct published_endpoint {
  std::string address;  // host:port
  int32_t fanout = 0;
  std::string hostname;

  std::string encode() const;
  /// Throws std::invalid_argument on a malformed text.
  static published_endpoint decode(const std::string& text);
  std::string host() const;  // of the address
  uint16_t port() const;
};

} // namespace troupe::control
