"""hvd.elastic.run's loop (troupe.common.elastic.run_fn) with a stand-in
state and reset: no collective runs, so every rank checks it alone."""

from troupe.common import elastic
from troupe.common.exceptions import HorovodInternalError


class _State:
    def __init__(self, failing_syncs):
        self.calls = []
        self.failing_syncs = failing_syncs

    def sync(self):
        self.calls.append('sync')
        if self.failing_syncs:
            self.failing_syncs -= 1
            raise HorovodInternalError('a peer was lost during the broadcast')

    def restore(self):
        self.calls.append('restore')

    def save(self):
        self.calls.append('save')

    def reset(self):
        self.calls.append('state.reset')

    def on_reset(self):
        self.calls.append('on_reset')


def test_a_peer_lost_during_the_state_sync_is_recovered_like_one_lost_in_training(
        monkeypatch):
    # Horovod syncs inside the loop's try: the worker restores, resets and
    # syncs again instead of ending with the error.
    monkeypatch.setattr(elastic._core, 'epoch_has_newcomers', lambda: False)
    state = _State(failing_syncs=1)
    train = elastic.run_fn(lambda s: s.calls.append('train') or 'done',
                           lambda: state.calls.append('reset'))
    assert train(state) == 'done'
    assert state.calls == ['sync', 'restore', 'reset', 'state.reset', 'on_reset', 'sync',
                           'train']
