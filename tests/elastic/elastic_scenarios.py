"""elastic_scenarios.py TROUPE_RUN SCENARIO [RUNS]

Runs troupe-run's elastic mode on simulated hosts (loopback names
127.0.0.2, 127.0.0.3, ...; a discovery script that prints a file the test
rewrites) with elastic_train.py, changes the job while it trains, and checks
what the workers logged (one JSON line per step) and troupe-run's exit
status. Every wait is bounded. Prints PASS or the failed checks; with
`bench`, the median recovery times of RUNS runs."""

import statistics
import sys

from elastic_harness import Skip, failures
from elastic_membership import (add_remove, all_fail, below_min_np, cooldown, cycles,
                                cycles_kill, discovery_fails_first, discovery_hangs_first,
                                discovery_later, kill, leave, process_sets, reset_limit, stop)
from elastic_metrics import metrics
from elastic_remote import etcd_elastic, etcd_static, partition, ssh_elastic, ssh_static


SCENARIOS = {
    'kill': kill,
    'stop': stop,
    'leave': leave,
    'add_remove': add_remove,
    'spawn_hook': lambda: add_remove(spawn_hook=True),
    'below_min_np': below_min_np,
    'process_sets': process_sets,
    'reset_limit_1': lambda: reset_limit(1),
    'reset_limit_2': lambda: reset_limit(2),
    'discovery_fails_first': discovery_fails_first,
    'discovery_hangs_first': discovery_hangs_first,
    'discovery_later': discovery_later,
    'cooldown': cooldown,
    'cycles_kill': cycles_kill,
    'all_fail': all_fail,
    'metrics': metrics,
    'partition': partition,
    'ssh_static': ssh_static,
    'ssh_elastic': ssh_elastic,
    'cycles': cycles,
    'etcd_static': etcd_static,
    'etcd_elastic': etcd_elastic,
}


def main():
    name = sys.argv[2]
    if name == 'bench':
        runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
        samples = {}
        for _ in range(runs):
            for scenario in (kill, stop, add_remove):
                for k, v in scenario().items():
                    samples.setdefault(k, []).append(v)
        for k, v in samples.items():
            print('%s: median %.3f s over %d runs (%s)' % (
                k, statistics.median(v), len(v), ' '.join('%.3f' % x for x in v)))
    else:
        try:
            for k, v in SCENARIOS[name]().items():
                print('%s: %.3f s' % (k, v))
        except TimeoutError:
            pass
        except Skip as e:
            print('SKIP: %s' % e)
            sys.exit(77)
    if failures:
        print('FAILED: %d check(s)' % len(failures))
        sys.exit(1)
    print('PASS')


if __name__ == '__main__':
    main()
