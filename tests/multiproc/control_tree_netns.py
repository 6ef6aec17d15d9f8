"""control_tree_netns.py TROUPE_RUN CHECK

The control tree across two simulated hosts (network namespaces A and B
joined by a veth pair, as in shm_netns.py): 3 ranks on each, fanout 2.
The tree follows the hosts: set rank 3, the first of host B, leads it
(ranks 4 and 5 send to it) and its lists, one per batch for all three,
are the only ones of host B that cross the veth pair to the coordinator. First cached training
steps checked exactly, with the tree in place and host B's node sending
its ranks' hits up as one; steps with the cache off, host B's node
merging its ranks' requests into one. The control connections are that
tree: rank 3's to rank 0 is the only one across the pair. Then that node
is SIGKILLed mid-collective and every survivor, on both hosts, must fail
its collective naming rank 3 within 5 s (heartbeat deadline 3 s): ranks
0, 4 and 5 hold a connection to it, ranks 1 and 2 hear of it from rank 0.
Exit 77 without root or ip netns."""

import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'elastic'))
from elastic_harness import Skip, TwoHosts, expect, failures  # noqa: E402
from shm_netns import run_two_hosts  # noqa: E402


def main():
    run, check = sys.argv[1], sys.argv[2]
    tree = ['--control-fanout', '2', '--timeout', '100']
    os.environ['TROUPE_HEARTBEAT_TIMEOUT_SECONDS'] = '3'
    stamp = tempfile.NamedTemporaryFile(prefix='troupe-stamp-', delete=False).name
    try:
        with TwoHosts() as net:
            steps = run_two_hosts(net, run, 3, tree + ['--log-level', 'info', check, 'cache', '500'])
            uncached = run_two_hosts(net, run, 3, tree + ['--log-level', 'info', '--cache-capacity',
                                                          '0', check, 'cache', '200'])
            lost = run_two_hosts(net, run, 3, tree + [check, 'lose-peer', 'kill', '3', stamp])
    except Skip as e:
        print('SKIP: %s' % e)
        sys.exit(77)
    finally:
        os.unlink(stamp)
    print(steps.stdout)
    print(steps.stderr)
    expect(steps.returncode == 0, 'the steps job exited %d' % steps.returncode)
    for r in range(6):
        expect(re.search(r'^\[%d\]<stdout>:rank %d: PASS 500 cached steps$' % (r, r), steps.stdout,
                         re.M), 'rank %d passed the cached steps' % r)
    expect('control tree of fanout 2 over 6 ranks (2 host(s)) in place; the coordinator sends '
           'lists to 4 of them' in steps.stderr, 'the tree was put in place, following the hosts')
    expect('sent the cache hits of set ranks [3, 6) up as one' in steps.stderr,
           'host B\'s node aggregated its ranks\' hits')
    for r, links in enumerate([3, 1, 1, 3, 1, 1]):
        expect('troupe rank %d: %d control connection(s) (the control tree of fanout 2)'
               % (r, links) in steps.stderr, 'rank %d holds %d control connection(s)' % (r, links))
    print(uncached.stdout)
    print(uncached.stderr)
    expect(uncached.returncode == 0, 'the job with the cache off exited %d' % uncached.returncode)
    for r in range(6):
        expect(re.search(r'^\[%d\]<stdout>:rank %d: PASS 200 cached steps$' % (r, r),
                         uncached.stdout, re.M), 'rank %d passed the steps with the cache off' % r)
    expect('sent the requests of set ranks [3, 6) up as one' in uncached.stderr,
           'host B\'s node merged its ranks\' requests')
    print(lost.stdout)
    print(lost.stderr)
    expect(lost.returncode not in (0, 124), 'the job that lost rank 3 exited %d, not an error'
           % lost.returncode)
    for r in (0, 1, 2, 4, 5):
        m = re.search(r'^\[%d\]<stdout>:rank %d: DETECTED after ([0-9.]+) s \(peer lost\): '
                      r'rank 3 ' % (r, r), lost.stdout, re.M)
        expect(m is not None, 'rank %d failed its collective naming rank 3' % r)
        if m:
            expect(float(m.group(1)) <= 5, 'rank %d noticed within 5 s (%s s)' % (r, m.group(1)))
        seen = 0 if r in (1, 2) else r
        expect(re.search(r'^\[%d\]<stdout>:rank %d: DETECTED .*\(seen by rank %d\)'
                         % (r, r, seen), lost.stdout, re.M),
               'rank %d learnt of the loss from rank %d' % (r, seen))
    print('FAILED: %d check(s)' % len(failures) if failures else 'PASS')
    sys.exit(1 if failures else 0)


if __name__ == '__main__':
    main()
