#pragma once

#include "troupe/v1/control.pb.h"

namespace troupe {

/// What the runtime needs to know of one collective, in one place: a new
/// collective is one row in op_properties.cpp, not a case in every switch.
struct op_properties {
  /// Horovod's spelling in errors and timeline spans ("ALLREDUCE").
  const char* name;
  /// Metric label ("allreduce").
  const char* label;
  /// A backend runs it (JOIN and ERROR are settled by the negotiator).
  bool executed;
  /// The response cache may keep its requests.
  bool cacheable;
  /// Members must agree on the reduce op and scale factors.
  bool reduces;
  /// Members must agree on the shape (else only on the trailing dims).
  bool same_shape;
  /// At least one dimension; the first may differ across members.
  bool gathers;
  /// Horovod's text when a member has joined; nullptr = allowed with join.
  const char* join_conflict;
};

/// The row of `op`; an unknown op gets a row that allows nothing.
const op_properties& properties(v1::OpType op);

/// The tensor name every rank's join() request uses (Horovod's): no other
/// collective may take it, or the coordinator would count it as a join.
constexpr const char* join_tensor_name = "join.noname";

} // namespace troupe
