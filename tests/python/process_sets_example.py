"""Horovod's process-set example, with only the import changed, plus the
dynamic API and its errors. Run on 4 ranks:
    troupe-run -np 4 python3 process_sets_example.py static|dynamic
    troupe-run --mpi -np 4 (or mpirun -np 4) python3 process_sets_example.py mpi4py
Prints "PASS" per rank; exits non-zero on the first failure."""
import sys

import torch

import troupe.torch as hvd


def even_odd(even_set, odd_set):
    # The example of Horovod's process-set document: two concurrent
    # allreduces, one per set.
    x = torch.tensor([float(hvd.rank())])
    if hvd.rank() % 2 == 0:
        result = hvd.allreduce(x, op=hvd.Sum, process_set=even_set)
        assert result.item() == 0 + 2, result
    else:
        result = hvd.allreduce(x, op=hvd.Sum, process_set=odd_set)
        assert result.item() == 1 + 3, result
    mine = even_set if hvd.rank() % 2 == 0 else odd_set
    assert mine.included() and mine.rank() == hvd.rank() // 2 and mine.size() == 2
    # Roots are global ranks; other collectives take the set too.
    y = torch.tensor([float(hvd.rank())])
    root = 2 if hvd.rank() % 2 == 0 else 3
    assert hvd.broadcast(y, root, process_set=mine).item() == root
    gathered = hvd.allgather(torch.tensor([[hvd.rank()]]), process_set=mine)
    assert gathered.flatten().tolist() == mine.ranks, gathered


def mpi_communicator_example():
    # Horovod's "Static process sets from MPI communicators" as documented,
    # only the import changed; the sets differ by rank.
    from mpi4py import MPI
    import troupe.torch as hvd  # was: import horovod.torch as hvd

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    subcomm = MPI.COMM_WORLD.Split(color=rank % 2, key=rank)
    split_process_set = hvd.ProcessSet(subcomm)
    hvd.init(comm, process_sets=[split_process_set])

    # ... ops on split_process_set
    total = hvd.allreduce(torch.tensor([float(rank)]), op=hvd.Sum, process_set=split_process_set)
    assert total.item() == (0 + 2 if rank % 2 == 0 else 1 + 3), total
    return split_process_set


def expect_value_error(text, fn):
    try:
        fn()
    except ValueError as e:
        assert text in str(e), (text, str(e))
        return
    raise AssertionError('no ValueError containing %r' % text)


def main(mode):
    if mode == 'static':
        even_set = hvd.ProcessSet([0, 2])
        odd_set = hvd.ProcessSet([1, 3])
        hvd.init(process_sets=[even_set, odd_set])
        assert (even_set.process_set_id, odd_set.process_set_id) == (1, 2)
        assert repr(even_set) == 'ProcessSet(process_set_id=1, ranks=[0, 2], mpi_comm=None)'
        even_odd(even_set, odd_set)
        other = odd_set if hvd.rank() % 2 == 0 else even_set
        expect_value_error('is not a member of the provided process set',
                           lambda: hvd.allreduce(torch.ones(1), process_set=other))
        expect_value_error('Set TROUPE_DYNAMIC_PROCESS_SETS=1',
                           lambda: hvd.add_process_set([0, 1]))
    elif mode == 'dynamic':
        hvd.init(process_sets='dynamic')
        even_set = hvd.add_process_set([0, 2])
        odd_set = hvd.add_process_set(hvd.ProcessSet([1, 3]))
        even_odd(even_set, odd_set)
        expect_value_error('duplicate rank', lambda: hvd.add_process_set([1, 1]))
        expect_value_error('has not been registered',
                           lambda: hvd.allreduce(torch.ones(1), process_set=hvd.ProcessSet([0, 1])))
        assert hvd.remove_process_set(odd_set)
        # The oldest freed id goes to the next set.
        again = hvd.add_process_set([1, 2, 3])
        assert again.process_set_id == 2, again
        if again.included():
            total = hvd.allreduce(torch.tensor([1.0]), op=hvd.Sum, process_set=again)
            assert total.item() == 3
        for s in (again, even_set):
            hvd.remove_process_set(s)
    elif mode == 'mpi4py':
        split_set = mpi_communicator_example()
        # Each rank's object got its own half's id: [0, 2] is 1, [1, 3] is 2.
        assert split_set.ranks == [hvd.rank() % 2, hvd.rank() % 2 + 2], split_set.ranks
        assert split_set.process_set_id == hvd.rank() % 2 + 1, split_set
        # even_odd uses only this rank's half.
        even_odd(split_set, split_set)
    print('rank %d: PASS process sets (%s)' % (hvd.rank(), mode), flush=True)
    hvd.shutdown()


if __name__ == '__main__':
    main(sys.argv[1])
