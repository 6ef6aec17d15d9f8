#pragma once

namespace troupe::workers {

/// Raises this process's soft limit on open descriptors to its hard limit:
/// a rank holds a control connection and, per Gloo process set, a data
/// connection to every peer, which passes the usual soft limit of 1,024
/// at about 510 ranks. Warns (once per call) when even the hard limit is
/// below what a process of a job of `size` ranks (a rank, or the
/// launcher's store) is estimated to need.
void raise_descriptor_limit(int size);

} // namespace troupe::workers
