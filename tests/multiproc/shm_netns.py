"""shm_netns.py TROUPE_RUN CHECK

Gloo's shared-memory allreduce on two simulated hosts of two ranks each:
network namespaces A and B joined by a veth pair (TwoHosts of
tests/elastic/elastic_scenarios.py, which creates them and removes them with
every process in them). troupe-run runs in A with -H A:2,B:2; a stand-in
for ssh starts each rank in its host's namespace, so the cross-host step
really crosses the veth pair. `collective_check shm-ops 1` checks every op
and exact allreduces below and above one 256 KiB round in seven dtypes; this
script checks that each host's two ranks shared one segment of their own
(two ranks' slots) and that every rank sent its shares across hosts (the
info-level log lines of shm_communicator). Exit 77 without root or ip
netns."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'elastic'))
from elastic_scenarios import Skip, TwoHosts, expect, failures  # noqa: E402

FAKE_SSH = """#!/usr/bin/python3
# Stands in for ssh: runs the remote command (the last argument) in the
# network namespace of its host (the argument before).
import os, sys
os.execvp('ip', ['ip', 'netns', 'exec', %r[sys.argv[-2]], '/bin/sh', '-c', sys.argv[-1]])
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


def main():
    run, check = sys.argv[1], sys.argv[2]
    try:
        with TwoHosts() as net:
            done = run_job(net, run, check)
    except Skip as e:
        print('SKIP: %s' % e)
        sys.exit(77)
    print(done.stdout)
    print(done.stderr)
    expect(done.returncode == 0, 'troupe-run exited %d' % done.returncode)
    host = {0: net.A, 1: net.A, 2: net.B, 3: net.B}
    segment = {}
    for r in range(4):
        out = '[%d]<stdout>:rank %d: ' % (r, r)
        err = '[%d]<stderr>:' % r
        for what in (r'PASS \d+ collectives$', r'PASS 189 allreduces of 1 B to 10 rounds, exact'):
            expect(re.search('^' + re.escape(out) + what, done.stdout, re.M),
                   'rank %d printed %r' % (r, what))
        m = re.search(re.escape(out) + r'PASS shared-memory segment (/troupe-\S+) (\d+)$',
                      done.stdout, re.M)
        expect(m is not None, 'rank %d maps a segment' % r)
        if m is None:
            continue
        segment[r] = m.group(1)
        expect(6 * ROUND <= int(m.group(2)) < 7 * ROUND,
               'rank %d: a segment of two ranks\' slots (6 x 256 KiB and a header), got %s bytes'
               % (r, m.group(2)))
        expect(re.search(r'^%s.*troupe rank %d: control plane .* listening on %s:' %
                         (re.escape(err), r, re.escape(host[r])), done.stderr, re.M),
               'rank %d listens on its namespace\'s address %s' % (r, host[r]))
        expect(re.search(r"^%s.*troupe set rank %d/4: shared-memory allreduce on host '%s' "
                         r'\(%d of 2\): local rank %d of 2, segment %s, cross-host step over Gloo$'
                         % (re.escape(err), r, re.escape(host[r]), r // 2, r % 2,
                            re.escape(segment[r])), done.stderr, re.M),
               'rank %d logged its place: host %d of 2, local rank %d of 2, segment %s, '
               'cross-host step' % (r, r // 2, r % 2, segment[r]))
        expect(re.search(r'^%s.*troupe set rank %d/4: CPU allreduces over gloo reduced 1048576 '
                         r'bytes at a time$' % (re.escape(err), r), done.stderr, re.M),
               'rank %d reduces 1 MiB at a time through the segment' % r)
        m = re.search(r'^%s.*troupe set rank %d/4: shared-memory allreduce: (\d+) allreduces, '
                      r'(\d+) bytes through segment %s, (\d+) bytes of this rank\'s shares '
                      r'across hosts$' % (re.escape(err), r, re.escape(segment[r])),
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
    print('FAILED: %d check(s)' % len(failures) if failures else 'PASS')
    sys.exit(1 if failures else 0)


if __name__ == '__main__':
    main()
