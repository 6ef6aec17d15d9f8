#pragma once

#include <string>
#include <vector>

// How the ranks of a plain mpirun (no troupe-run to hand them a secret)
// agree on the job's secret: in one MPI allgather, every rank says whether
// it was given TROUPE_SECRET_KEY, with a fingerprint of it (never the key),
// and rank 0 without one adds a secret of its own drawing. Every rank then
// decides alike from the same offers, so a key set on some ranks only, or
// different keys, fail every rank with one error naming them, where the
// ranks without a key used to wait in an allgather the others never joined.
namespace troupe::workers {

/// This rank's offer: "-" (no key; rank 0 appends a fresh secret) or "K"
/// followed by the key's fingerprint (64 hex digits).
std::string secret_offer(const std::string& key, int rank);

/// The job's secret from every rank's offer (index = rank) and this rank's
/// `key`: the key when every rank has the same one, rank 0's draw when none
/// has one. Throws config_error naming the ranks with and without a key, or
/// those that share each key.
std::string secret_from_offers(const std::vector<std::string>& offers, const std::string& key);

} // namespace troupe::workers
