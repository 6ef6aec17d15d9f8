"""Elastic training (horovod.common.elastic) on Troupe's in-place reset.

troupe-run's elastic driver plans every membership epoch; a worker moves to
the next one with reset(), in the same process. Differences from Horovod
(docs/elastic.md): every rank reads troupe-run's host updates and the ranks
agree on them with a collective; whether state must be synced after a reset
is agreed too (a member that never served before always gets it); state is
saved before the reset a host update causes, so the model and the counters
stay together."""

import functools
import sys

from troupe import _core
from troupe.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

# troupe::host_update bits.
_ADDED = 1
_REMOVED = 2

# A reset that fails (a member died while the next epoch started) is tried
# again this many times before the error ends the process.
_RESET_ATTEMPTS = 3


class State:
    """State of a training job that survives resets: `save()` commits it,
    `restore()` rolls back to the last commit, `sync()` copies rank 0's to
    every rank. `allreduce_max` agrees on a small list of ints (elementwise
    maximum over the ranks)."""

    def __init__(self, bcast_object, get_rank, allreduce_max):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._allreduce_max = allreduce_max
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions called after every reset, before state is synced."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        """Horovod's notification entry point. Troupe's ranks read host
        updates from the rendezvous store in check_host_updates(), so there
        is nothing to queue."""

    def commit(self):
        """Saves the state, then raises HostsUpdatedInterrupt if troupe-run
        has announced a change of hosts."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank when troupe-run has
        announced a change of hosts during this membership epoch (seen by
        any rank: the ranks agree with one collective). skip_sync is true
        when hosts were only removed."""
        update = _core.hosts_updated()
        added, removed = self._allreduce_max([update & _ADDED, update & _REMOVED])
        if added or removed:
            raise HostsUpdatedInterrupt(skip_sync=not added)

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()

    def reset(self):
        """Called after the reset, before the callbacks (framework state
        that depends on rank or size)."""


class ObjectState(State):
    """Plain attributes (`ObjectState(bcast, rank, allreduce_max, epoch=0,
    batch=0)`): save() keeps a shallow copy, sync() broadcasts the saved
    values from rank 0."""

    def __init__(self, bcast_object, get_rank, allreduce_max, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank,
                         allreduce_max=allreduce_max)

    def save(self):
        self._saved_state = {attr: getattr(self, attr) for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, value)


def run_fn(func, reset):
    """hvd.elastic.run's loop: sync, run `func`; on HorovodInternalError
    (in either) restore the last commit, on HostsUpdatedInterrupt save; then
    reset and go on. Any other exception (and a removal: SystemExit(0)) ends it."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                # Inside the try, as Horovod's: a peer lost while the state
                # is broadcast after a reset is recovered like one lost in
                # training, not the end of this worker.
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError:
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                # Model and counters stay together: both as they are now.
                state.save()
                skip_sync = e.skip_sync
            _reset_with_retries(reset)
            state.reset()
            state.on_reset()
            # A newcomer syncs on its first pass: so must everyone else.
            if _core.epoch_has_newcomers():
                skip_sync = False

    return wrapper


def _reset_with_retries(reset):
    for attempt in range(_RESET_ATTEMPTS):
        try:
            reset()
            return
        except HorovodInternalError as e:
            if attempt + 1 == _RESET_ATTEMPTS:
                raise
            print('troupe: reset failed, trying again: %s' % e, file=sys.stderr)
