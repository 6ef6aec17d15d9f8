"""Horovod's exception classes, under the names training scripts catch."""


class HorovodInternalError(RuntimeError):
    """A collective failed: ranks disagreed, a peer was lost or shut down, or
    the communication library reported an error."""


class HostsUpdatedInterrupt(RuntimeError):
    """The set of hosts changed (elastic training); `skip_sync` tells whether
    state must be synchronised again after the reset."""

    def __init__(self, skip_sync):
        super().__init__()
        self.skip_sync = skip_sync


class WorkerRemoved(SystemExit):
    """Elastic jobs: troupe-run's new membership has no place for this
    process (its host left, or the job is at --max-np). Uncaught, it ends
    the process with exit status 0, which troupe-run expects of it."""

    def __init__(self, message):
        super().__init__(0)
        self.message = message

    def __str__(self):
        return self.message


# troupe::status_code::invalid_argument: the arguments were rejected before
# anything was sent; every other failure happened in the collective itself.
_INVALID_ARGUMENT = 1
# troupe::status_code::removed.
_REMOVED = 9


def status_error(code, message):
    """The exception for a failed troupe::status (code != 0)."""
    if code == _INVALID_ARGUMENT:
        return ValueError(message)
    if code == _REMOVED:
        return WorkerRemoved(message)
    return HorovodInternalError(message)
