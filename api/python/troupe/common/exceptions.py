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


# troupe::status_code::invalid_argument: the arguments were rejected before
# anything was sent; every other failure happened in the collective itself.
_INVALID_ARGUMENT = 1


def status_error(code, message):
    """The exception for a failed troupe::status (code != 0)."""
    if code == _INVALID_ARGUMENT:
        return ValueError(message)
    return HorovodInternalError(message)
