"""What the fast lane (cached tensors agreed on the host's arrival board)
must survive: posts it abandons when the lane goes off."""

import time

import torch

import troupe.torch as hvd


def test_a_post_abandoned_for_a_join_does_not_count_once_the_lane_is_back(needs_peers):
    # Cached, so that the next call of the name is posted on the board.
    for _ in range(3):
        hvd.allreduce(torch.ones(2), op=hvd.Sum, name='lane.join')
    last = hvd.size() - 1
    if hvd.rank() != last:
        # Posted while the last rank has not asked yet; its join turns the
        # lane off and the post goes to the coordinator (the join adds zeros).
        out = hvd.allreduce(torch.ones(2), op=hvd.Sum, name='lane.join')
        assert torch.equal(out, torch.full((2,), float(hvd.size() - 1)))
    else:
        time.sleep(0.5)
    hvd.join()
    # The lane is on again and the id unchanged (a list with a joined rank
    # caches nothing): a bit left from the abandoned post would complete
    # the last rank's post alone, and the last rank would run it by
    # itself, while the others have not asked yet (hence their sleep).
    for i in range(3):
        if hvd.rank() != last:
            time.sleep(0.2)
        out = hvd.allreduce(torch.full((2,), float(i)), op=hvd.Sum, name='lane.join')
        assert torch.equal(out, torch.full((2,), float(i * hvd.size()))), i
