"""Troupe: a collective-communication runtime in the lineage of Horovod.

`troupe.torch` is the PyTorch front end (a drop-in for `horovod.torch`).
"""
