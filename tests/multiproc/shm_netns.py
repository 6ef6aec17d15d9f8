"""shm_netns.py TROUPE_RUN CHECK [--mpi]

Gloo's shared-memory allreduce on two simulated hosts of two ranks each:
network namespaces A and B joined by a veth pair (TwoHosts of
tests/elastic/elastic_harness.py, which creates them and removes them with
every process in them). troupe-run runs in A with -H A:2,B:2; a stand-in
for ssh starts each rank in its host's namespace, so the cross-host step
really crosses the veth pair. `collective_check shm-ops 1` checks every op
and exact allreduces below and above one 256 KiB round in seven dtypes; this
script checks that each host's two ranks shared one segment of their own
(two ranks' slots) and that every rank sent its shares across hosts (the
info-level log lines of shm_communicator). Exit 77 without root or ip
netns.

--mpi: the same under troupe-run --mpi. mpirun runs in A; its rsh launcher
starts orted on B through the stand-in for ssh, in B's namespace, and Open
MPI's TCP traffic (OOB and BTL) is held to tp0. The MPI backend groups a
set's ranks by host with MPI_COMM_TYPE_SHARED, i.e. by mpirun's nodes, not
by host name; but Open MPI names its own shared-memory files (the vader
BTL's in /dev/shm) and session directories (in /tmp) after the host name,
and the namespaces share both directories and one UTS host name: B's orted
and ranks get a UTS namespace of their own with another host name, as a
second machine would have (without it both hosts' local rank 0 map one
vader file and a rank crashes in mca_btl_vader_poll_handle_frag). The MPI
backend logs no cross-host byte count, so bytes across hosts are A's tp0
counters (bytes sent and received) over the job. Exit 77 also without
unshare(1)."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'elastic'))
from elastic_harness import Skip, TwoHosts, expect, failures  # noqa: E402

FAKE_SSH = """#!/usr/bin/python3
# Stands in for ssh: runs the remote command (the last argument) in the
# network namespace of its host (the argument before).
import os, sys
os.execvp('ip', ['ip', 'netns', 'exec', %r[sys.argv[-2]], '/bin/sh', '-c', sys.argv[-1]])
"""

# ORTE's rsh launcher calls it as `ssh [-x] HOST WORD...`, the words a
# command line for the remote shell (quoted for it): they are joined as ssh
# joins them. The command runs in the host's namespace, in a UTS namespace
# of its own named after the host (see --mpi above), and, as under sshd,
# without the caller's environment: a TROUPE_* setting reaches the ranks
# there only if mpirun passes it on (troupe-run's -x), which the
# info-level lines checked below need. Running as root needs Open MPI's two
# permissions there too.
FAKE_SSH_MPI = """#!/usr/bin/python3
import os, sys
args = sys.argv[1:]
while args and args[0].startswith('-'):
    args = args[1:]
ns, name = %r[args[0]]
os.execvpe('ip', ['ip', 'netns', 'exec', ns, 'unshare', '--uts', '/bin/sh', '-c',
                  'hostname "$1" && exec /bin/sh -c "$2"', 'sh', name, ' '.join(args[1:])],
           {'PATH': os.environ['PATH'], 'HOME': '/root', 'OMPI_ALLOW_RUN_AS_ROOT': '1',
            'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1'})
"""

ROUND = 256 << 10


def run_two_hosts(net, run, per_host, args, timeout=150):
    """troupe-run in A with PER_HOST ranks on each of A and B, the ranks
    started in their host's namespace; ARGS follow the host list."""
    d = tempfile.mkdtemp(prefix='troupe-ssh-')
    try:
        with open(os.path.join(d, 'ssh'), 'w') as f:
            f.write(FAKE_SSH % {net.A: net.a, net.B: net.b})
        os.chmod(os.path.join(d, 'ssh'), 0o755)
        env = dict(os.environ, PATH=d + ':' + os.environ['PATH'])
        return subprocess.run(['ip', 'netns', 'exec', net.a, run, '-np', str(2 * per_host),
                               '-H', '%s:%d,%s:%d' % (net.A, per_host, net.B, per_host),
                               '--network-interface', 'tp0'] + args,
                              env=env, capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(d, True)


def run_job(net, run, check):
    return run_two_hosts(net, run, 2, ['--log-level', 'info', '--timeout', '120',
                                       check, 'shm-ops', '1'])


def tp0_bytes(ns):
    """Bytes sent and received on namespace NS's end of the veth pair."""
    def counter(name):
        return int(subprocess.run(['ip', 'netns', 'exec', ns, 'cat',
                                   '/sys/class/net/tp0/statistics/' + name],
                                  capture_output=True, text=True, timeout=10, check=True).stdout)
    return counter('tx_bytes'), counter('rx_bytes')


def run_mpi_job(net, run, check, timeout=150):
    """troupe-run --mpi in A, 2 ranks on each of A and B; A's tp0 bytes
    (sent, received) over the job."""
    if not shutil.which('unshare'):
        raise Skip('no unshare(1) (util-linux)')
    d = tempfile.mkdtemp(prefix='troupe-ssh-')
    try:
        ssh = os.path.join(d, 'ssh')
        with open(ssh, 'w') as f:
            f.write(FAKE_SSH_MPI % {net.A: (net.a, 'troupe-host-a'),
                                    net.B: (net.b, 'troupe-host-b')})
        os.chmod(ssh, 0o755)
        # Open MPI's two permissions to run as root, for mpirun and its
        # ranks in A (the stand-in gives B's side its own, as its shell
        # profile would).
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')
        before = tp0_bytes(net.a)
        done = subprocess.run(
            ['ip', 'netns', 'exec', net.a, run, '--mpi', '-np', '4',
             '-H', '%s:2,%s:2' % (net.A, net.B), '--network-interface', 'tp0',
             '--mpi-args=--mca plm_rsh_agent %s --mca oob_tcp_if_include tp0 '
             '--mca btl_tcp_if_include tp0' % ssh,
             '--log-level', 'info', '--timeout', '120', check, 'shm-ops', '1'],
            env=env, capture_output=True, text=True, timeout=timeout)
        after = tp0_bytes(net.a)
        return done, (after[0] - before[0], after[1] - before[1])
    finally:
        shutil.rmtree(d, True)


def main():
    run, check = sys.argv[1], sys.argv[2]
    mpi = sys.argv[3:] == ['--mpi']
    try:
        with TwoHosts() as net:
            if mpi:
                done, (sent, received) = run_mpi_job(net, run, check)
            else:
                done = run_job(net, run, check)
    except Skip as e:
        print('SKIP: %s' % e)
        sys.exit(77)
    print(done.stdout)
    print(done.stderr)
    expect(done.returncode == 0, 'troupe-run exited %d' % done.returncode)
    host = {0: net.A, 1: net.A, 2: net.B, 3: net.B}
    segment = {}
    through_most = 0
    for r in range(4):
        # mpirun --tag-output tags a line [JOB,RANK]; troupe-run [RANK].
        tag = r'\[\d+,%d\]' % r if mpi else re.escape('[%d]' % r)
        out = tag + re.escape('<stdout>:rank %d: ' % r)
        err = tag + re.escape('<stderr>:')
        for what in (r'PASS \d+ collectives$', r'PASS 189 allreduces of 1 B to 10 rounds, exact'):
            expect(re.search('^' + out + what, done.stdout, re.M),
                   'rank %d printed %r' % (r, what))
        m = re.search('^' + out + r'PASS shared-memory segment (/troupe-\S+) (\d+)$',
                      done.stdout, re.M)
        expect(m is not None, 'rank %d maps a segment' % r)
        if m is None:
            continue
        segment[r] = m.group(1)
        expect(6 * ROUND <= int(m.group(2)) < 7 * ROUND,
               'rank %d: a segment of two ranks\' slots (6 x 256 KiB and a header), got %s bytes'
               % (r, m.group(2)))
        expect(re.search(r'^%s.*troupe rank %d: control plane .* listening on %s:' %
                         (err, r, re.escape(host[r])), done.stderr, re.M),
               'rank %d listens on its namespace\'s address %s' % (r, host[r]))
        if mpi:
            through_most = max(through_most, check_mpi_rank(done, r, err, segment[r]))
            continue
        expect(re.search(r"^%s.*troupe set rank %d/4: shared-memory allreduce on host '%s' "
                         r'\(%d of 2\): local rank %d of 2, segment %s, cross-host step over Gloo$'
                         % (err, r, re.escape(host[r]), r // 2, r % 2,
                            re.escape(segment[r])), done.stderr, re.M),
               'rank %d logged its place: host %d of 2, local rank %d of 2, segment %s, '
               'cross-host step' % (r, r // 2, r % 2, segment[r]))
        expect(re.search(r'^%s.*troupe set rank %d/4: CPU allreduces over gloo reduced 1048576 '
                         r'bytes at a time$' % (err, r), done.stderr, re.M),
               'rank %d reduces 1 MiB at a time through the segment' % r)
        m = re.search(r'^%s.*troupe set rank %d/4: shared-memory allreduce: (\d+) allreduces, '
                      r'(\d+) bytes through segment %s, (\d+) bytes of this rank\'s shares '
                      r'across hosts$' % (err, r, re.escape(segment[r])),
                      done.stderr, re.M)
        expect(m is not None, 'rank %d logged its shared-memory totals at shutdown' % r)
        if m:
            allreduces, through, across = map(int, m.groups())
            # The size checks alone: 7 dtypes x 3 ops x (5,024 KiB and a few
            # elements), the last two sizes in 1 MiB chunks (2 and 3 calls);
            # a rank's share of a round is about half of it.
            expect(allreduces >= 21 * 12 and through >= 21 * 5024 * 1024 and across * 4 >= through,
                   'rank %d: %d allreduces, %d bytes through the segment, %d bytes of its '
                   'shares (about half of each round) across hosts'
                   % (r, allreduces, through, across))
    if len(segment) == 4:
        expect(segment[0] == segment[1] and segment[2] == segment[3],
               'each host\'s ranks share a segment: %s' % segment)
        expect(segment[0] != segment[2], 'each host has a segment of its own: %s' % segment)
    if mpi:
        # Each host's two ranks allreduce their halves of every round with
        # the other host's: about the round each way, over the veth pair.
        expect(through_most >= 21 * 5024 * 1024 and min(sent, received) * 2 >= through_most,
               'bytes across hosts: A\'s tp0 sent %d and received %d over the job, each at '
               'least half of the %d bytes a rank put through the segment'
               % (sent, received, through_most))
    print('FAILED: %d check(s)' % len(failures) if failures else 'PASS')
    sys.exit(1 if failures else 0)


def check_mpi_rank(done, r, err, seg):
    """Rank R's info lines under mpirun: its place in its host's segment
    (the host group is MPI's, by mpirun's nodes) and its totals; the bytes
    it put through the segment."""
    expect(re.search(r'^%s.*troupe set rank %d/4: shared-memory allreduce: local rank %d of 2, '
                     r'segment %s, cross-host step over MPI$' % (err, r, r % 2, re.escape(seg)),
                     done.stderr, re.M),
           'rank %d logged its place: local rank %d of 2, segment %s, cross-host step over MPI'
           % (r, r % 2, seg))
    expect(re.search(r'^%s.*troupe set rank %d/4: CPU allreduces over mpi reduced 1048576 '
                     r'bytes at a time$' % (err, r), done.stderr, re.M),
           'rank %d reduces 1 MiB at a time through the segment' % r)
    m = re.search(r'^%s.*troupe set rank %d/4: shared-memory allreduce: (\d+) allreduces, '
                  r'(\d+) bytes through segment %s$' % (err, r, re.escape(seg)),
                  done.stderr, re.M)
    expect(m is not None, 'rank %d logged its shared-memory totals at shutdown' % r)
    if m:
        allreduces, through = map(int, m.groups())
        expect(allreduces >= 21 * 12 and through >= 21 * 5024 * 1024,
               'rank %d: %d allreduces, %d bytes through the segment' % (r, allreduces, through))
        return through
    return 0


if __name__ == '__main__':
    main()
