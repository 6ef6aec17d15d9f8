"""Elastic scenarios on loopback hosts in which the job's membership
changes: a worker killed, frozen, leaving or failing; hosts added, removed
or cooling down; --min-np, the reset limit; host discovery failing or
hanging; many add/remove cycles. Each returns measured times (seconds) by
name."""

import os
import shutil
import signal
import sys
import tempfile
import time

from elastic_harness import (Job, check_checksums, check_every_index, check_ranks, expect,
                             first_step_after, hosts, survivors_resume, training_step)


def kill(flags=()):
    job = Job(hosts(2, 3, 4), np=3, flags=['--min-np', '2', *flags],
              train=['--dataset-size', '900', '--step-sleep', '0.02'])
    took = survivors_resume(job, signal.SIGKILL)
    rc = job.finish()
    expect(rc == 0, 'exit status %d, expected 0' % rc)
    expect('host 127.0.0.4 is blacklisted' in job.output(), 'host of the killed worker blacklisted')
    check_checksums(job)
    check_ranks(job)
    return {'kill_to_training': took}


def cooldown():
    """With --blacklist-cooldown-range, the host of a killed worker comes
    back once its cooldown (1-2 s) ends: a new worker starts there and
    trains with the survivors at size 3."""
    job = Job(hosts(2, 3, 4), np=3,
              flags=['--min-np', '2', '--blacklist-cooldown-range', '1', '2'],
              train=['--dataset-size', '2400', '--step-sleep', '0.02'])
    survivors_resume(job, signal.SIGKILL)
    job.wait_for(lambda e: e['event'] == 'step' and e['worker'] == 3 and e['size'] == 3,
                 'a new worker on 127.0.0.4 trains at size 3 after the cooldown', timeout=20)
    rc = job.finish()
    expect(rc == 0, 'exit status %d, expected 0' % rc)
    expect('host 127.0.0.4 is blacklisted' in job.output(), 'host of the killed worker blacklisted')
    check_checksums(job)
    return {}


def all_fail():
    """Every worker fails at once: the job fails with the first failure's
    status and says so, instead of ending with 0 as the exits came in (it
    did, before the driver held the job open while its reset round ran)."""
    job = Job(hosts(2, 3), np=2, flags=['--min-np', '1'],
              train=['--dataset-size', '900', '--step-sleep', '0.02', '--fail-at-batch', '3'])
    t0 = time.time()
    rc = job.finish(40)
    expect(rc == 3, 'exit status %d, expected 3 (the workers\' status)' % rc)
    expect(time.time() - t0 < 30, 'the job ends within 30 s, not after --elastic-timeout')
    out = job.output()
    expect('error: every worker of membership epoch 0 has exited; one failed, so the job failed'
           in out, 'the job says why it ended: %s' % out[-1500:])
    return {}


def leave():
    """A worker exiting 0 while the others train leaves gracefully (Horovod
    would end the job): nothing is blacklisted, its host still listed gets
    a new worker, and the job succeeds."""
    job = Job(hosts(2, 3, 4), np=3, flags=['--min-np', '2'],
              train=['--dataset-size', '900', '--step-sleep', '0.02', '--leave-at-batch', '5'])
    job.wait_for(lambda e: e['event'] == 'step' and e['worker'] == 3 and e['membership'] >= 1,
                 'a new worker on 127.0.0.4 trains with the others')
    rc = job.finish()
    expect(rc == 0, 'exit status %d, expected 0' % rc)
    expect('worker 2 (rank 2 of epoch 0, host 127.0.0.4) left the job (exit status 0)'
           in job.output(), 'the leave is reported')
    expect('blacklisted' not in job.output(), 'a leave blacklists nothing')
    done = {e['worker'] for e in job.events if e['event'] == 'done'}
    expect(done == {0, 1, 3}, 'workers 0, 1 and 3 finish the epoch: %s' % done)
    check_checksums(job)
    return {}


def stop():
    """A frozen worker (SIGSTOP) is evicted once its peers' heartbeat
    timeout passes; troupe-run fails it without waiting for --reset-timeout."""
    job = Job(hosts(2, 3, 4), np=3,
              flags=['--min-np', '2', '--heartbeat-timeout-seconds', '2',
                     '--gloo-timeout-seconds', '4'],
              train=['--dataset-size', '900', '--step-sleep', '0.02'])
    took = survivors_resume(job, signal.SIGSTOP)
    rc = job.finish()
    expect(rc == 0, 'exit status %d, expected 0' % rc)
    expect('was lost by its peers and did not arrive' in job.output(), 'frozen worker failed early')
    check_checksums(job)
    return {'stop_to_training': took}


def check_output_files(job, folder):
    """--output-filename: each worker's lines in its own folder, by worker
    id, exactly as troupe-run printed them."""
    for worker in sorted({e['worker'] for e in job.events}):
        for stream in ('stdout', 'stderr'):
            tag = '[%d]<%s>:' % (worker, stream)
            printed = [line for line in job.lines if line.startswith(tag)]
            path = os.path.join(folder, 'rank.%d' % worker, stream)
            with open(path) as f:
                written = f.read().splitlines()
            expect(written == printed, '%s holds the %d lines tagged %s (has %d)'
                   % (path, len(printed), tag, len(written)))


def add_remove(spawn_hook=False):
    size = 600
    flags = ['--min-np', '2']
    if spawn_hook:
        flags += ['--spawn-command', 'env SPAWNED_ON=$TROUPE_SPAWN_HOST']
    out = tempfile.mkdtemp(prefix='troupe-elastic-out-')
    flags += ['--output-filename', out]
    job = Job(hosts(2, 3), np=2, flags=flags,
              train=['--dataset-size', str(size), '--step-sleep', '0.02', '--commit-every', '1'])
    job.wait_for(lambda e: e['event'] == 'step' and e['batch'] >= 3, 'training at size 2')
    t_add = time.time()
    job.set_hosts(hosts(2, 3, 4))
    grown = first_step_after(job, t_add, lambda e: e['size'] == 3 and e['worker'] == 2,
                             'the new worker trains at size 3')
    job.wait_for(lambda e: e['event'] == 'step' and e['size'] == 3 and e['batch'] >= grown['batch'] + 3,
                 'a few steps at size 3')
    t_rm = time.time()
    job.set_hosts(hosts(2, 3))
    shrunk = first_step_after(job, t_rm, lambda e: e['size'] == 2, 'training at size 2 again')
    rc = job.finish()
    expect(rc == 0, 'exit status %d, expected 0' % rc)
    check_checksums(job)
    check_ranks(job)
    check_every_index(job, size)
    check_output_files(job, out)
    shutil.rmtree(out, ignore_errors=True)
    if spawn_hook:
        done = [e for e in job.events if e['event'] == 'done']
        expect(done and all(e['spawned_on'] in hosts(2, 3) for e in done),
               'workers started through --spawn-command: %s' % done)
    # From the file change (includes up to 1 s of discovery polling) and
    # from troupe-run's announcement of the change.
    noticed_add = job.noted('hosts changed', t_add)
    noticed_rm = job.noted('hosts changed', t_rm)
    return {'host_added_to_first_step': grown['time'] - t_add,
            'host_added_announced_to_first_step': grown['time'] - noticed_add,
            'host_removed_to_training': shrunk['time'] - t_rm,
            'host_removed_announced_to_training': shrunk['time'] - noticed_rm}


def process_sets():
    """A dynamic process set (every rank but the last) through three resets
    (host added, host replaced, worker killed): the stale set is refused by
    name, the one registered again in the reset callback reduces over the
    new membership."""
    job = Job(hosts(2, 3), np=2, flags=['--min-np', '2'],
              train=['--dataset-size', '900', '--step-sleep', '0.02', '--process-set'])
    job.wait_for(lambda e: e['event'] == 'step' and e['batch'] >= 3, 'training')
    t = time.time()
    job.set_hosts(hosts(2, 3, 4))
    first_step_after(job, t, lambda e: e['size'] == 3 and e['worker'] == 2, 'grown')
    t = time.time()
    job.set_hosts(hosts(2, 3, 5))
    victim = first_step_after(job, t, lambda e: e['size'] == 3 and e['worker'] == 3,
                              'worker 3 replaces worker 2')
    t = time.time()
    os.kill(victim['pid'], signal.SIGKILL)
    first_step_after(job, t, lambda e: e['size'] == 2 and e['membership'] > victim['membership'],
                     'survivors train at size 2')
    rc = job.finish()
    expect(rc == 0, 'exit status %d, expected 0' % rc)
    steps = job.steps()
    expect(all(e.get('pset') == (e['size'] - 1 if e['rank'] < e['size'] - 1 else None)
               for e in steps),
           'the set of every rank but the last reduces over its members at every step')
    resets = [e for e in job.events if e['event'] == 'reset']
    expect(len({e['membership'] for e in resets}) >= 3, 'three resets or more: %s' % resets)
    expect(all('was dissolved by the reset to membership epoch' in e['stale'] for e in resets),
           'a stale set is refused: %s' % [e['stale'] for e in resets][:3])
    check_checksums(job)
    return {}


def cycles_kill():
    """Cycles (argv[3], default 4) of: host 127.0.0.4 added (size 3), its
    worker killed (the host cools down 1-2 s while the survivors train at
    size 2, then a new worker starts there: size 3), the host removed
    (size 2). Worker 0's open fds and threads stay flat across the cycles."""
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    job = Job(hosts(2, 3), np=2,
              flags=['--min-np', '2', '--blacklist-cooldown-range', '1', '2'],
              train=['--dataset-size', '1000000', '--step-sleep', '0.02', '--commit-every', '1',
                     '--count-resources'],
              limit=60 + 15 * n)
    job.wait_for(lambda e: e['event'] == 'step' and e['batch'] >= 2, 'training')
    start = time.time()
    for cycle in range(n):
        # Worker ids only grow: the one started on 127.0.0.4 is the newest.
        before = max(e['worker'] for e in job.steps())
        t = time.time()
        job.set_hosts(hosts(2, 3, 4))
        victim = first_step_after(job, t, lambda e: e['size'] == 3 and e['worker'] > before,
                                  'the worker on 127.0.0.4 trains (cycle %d)' % cycle)
        t = time.time()
        os.kill(victim['pid'], signal.SIGKILL)
        first_step_after(job, t, lambda e: e['size'] == 3 and e['worker'] > victim['worker'],
                         'back at size 3 after the cooldown (cycle %d)' % cycle)
        t = time.time()
        job.set_hosts(hosts(2, 3))
        first_step_after(job, t, lambda e: e['size'] == 2, 'shrunk (cycle %d)' % cycle)
    took = (time.time() - start) / n
    job.stop()
    job.finish()
    expect(job.output().count('was killed by signal SIGKILL; host 127.0.0.4 is blacklisted') == n,
           'each cycle killed the worker on 127.0.0.4')
    resets = [e for e in job.events if e['event'] == 'reset' and e['worker'] == 0]
    counts = [(e['fds'], e['threads']) for e in resets if e['size'] == 2]
    expect(len(counts) >= 2 * n, 'worker 0 reset to size 2 %d times, expected %d' % (
        len(counts), 2 * n))
    # The first cycle warms up; a leak grows with every cycle.
    early, late = counts[1:n + 1], counts[n + 1:]
    for i, what in ((0, 'fd'), (1, 'thread')):
        expect(max(c[i] for c in late) <= max(c[i] for c in early),
               '%s counts grow over cycles: %s' % (what, counts))
    print('worker 0 at size 2, (fds, threads): cycle 1 %s, last %s, max after cycle 1 %s' % (
        counts[1], counts[-1], tuple(max(c[i] for c in counts[1:]) for i in (0, 1))))
    return {'seconds_per_cycle': took}


def below_min_np():
    job = Job(hosts(2, 3), np=2, flags=['--min-np', '2'],
              train=['--dataset-size', '600', '--step-sleep', '0.02'])
    os.kill(training_step(job, 1)['pid'], signal.SIGKILL)
    deadline = time.time() + 20
    while 'below --min-np 2' not in job.output() and time.time() < deadline:
        time.sleep(0.1)
    expect('below --min-np 2' in job.output(), 'troupe-run waits for --min-np slots')
    job.set_hosts(hosts(2, 3, 4))
    job.wait_for(lambda e: e['event'] == 'step' and e['size'] == 2 and e['worker'] == 2,
                 'the new worker trains with the survivor')
    rc = job.finish()
    expect(rc == 0, 'exit status %d, expected 0' % rc)
    check_checksums(job)
    return {}


def reset_limit(limit):
    job = Job(hosts(2, 3, 4), np=3, flags=['--min-np', '1', '--reset-limit', str(limit)],
              train=['--dataset-size', '900', '--step-sleep', '0.02'])
    for worker in (2, 1):
        os.kill(training_step(job, worker)['pid'], signal.SIGKILL)
        if worker == 2:
            first_step_after(job, time.time(), lambda e: e['size'] == 2, 'training at size 2')
    rc = job.finish()
    exceeded = 'number of resets during elastic job exceeded limit: %d' % limit in job.output()
    if limit == 1:
        expect(rc == 1 and exceeded, 'reset limit 1: exit %d, message %s' % (rc, exceeded))
    else:
        expect(rc == 0 and not exceeded, 'reset limit 2: exit %d, message %s' % (rc, exceeded))
    return {}


def discovery_fails_first():
    job = Job([], np=1, script='echo no inventory >&2; exit 3')
    rc = job.finish(30)
    expect(rc == 1, 'exit status %d, expected 1' % rc)
    expect("host discovery script 'echo no inventory >&2; exit 3' exited with status 3: "
           "no inventory" in job.output(), 'error names the script, status and its message')
    return {}


def discovery_hangs_first():
    job = Job([], np=1, script='sleep 60', flags=['--host-discovery-timeout', '1'])
    t0 = time.time()
    rc = job.finish(30)
    expect(rc == 1, 'exit status %d, expected 1' % rc)
    expect(time.time() - t0 < 20, 'a hanging script holds the job no longer than its timeout')
    expect("host discovery script 'sleep 60' did not finish within 1 s" in job.output(),
           'error names the hanging script')
    return {}


def discovery_later():
    d = tempfile.mkdtemp(prefix='troupe-elastic-')
    fail, hang, listing = (os.path.join(d, n) for n in ('fail', 'hang', 'hosts'))
    script = ('[ -e %s ] && exit 4; [ -e %s ] && sleep 60; cat %s' % (fail, hang, listing))
    job = Job(hosts(2, 3), np=2, script=script, flags=['--host-discovery-timeout', '1'],
              train=['--dataset-size', '1200', '--step-sleep', '0.03'])
    job.hosts_file = listing
    job.set_hosts(hosts(2, 3))
    job.wait_for(lambda e: e['event'] == 'step' and e['batch'] >= 2, 'training')
    open(fail, 'w').close()
    time.sleep(2.5)
    os.remove(fail)
    open(hang, 'w').close()
    time.sleep(3)
    os.remove(hang)
    rc = job.finish()
    out = job.output()
    expect(rc == 0, 'exit status %d, expected 0' % rc)
    expect('exited with status 4; keeping the last hosts' in out, 'a later failure keeps hosts')
    expect('did not finish within 1 s (--host-discovery-timeout); killed it; keeping the last '
           'hosts' in out, 'a later hang is killed and keeps hosts')
    expect(all(e['size'] == 2 for e in job.steps()), 'membership unchanged')
    return {}


def cycles(n=6):
    job = Job(hosts(2, 3), np=2, flags=['--min-np', '2'],
              train=['--dataset-size', '100000', '--step-sleep', '0.02', '--commit-every', '1',
                     '--count-resources'],
              limit=240)
    job.wait_for(lambda e: e['event'] == 'step' and e['batch'] >= 2, 'training')
    for _ in range(n):
        t = time.time()
        job.set_hosts(hosts(2, 3, 4))
        first_step_after(job, t, lambda e: e['size'] == 3, 'grown')
        t = time.time()
        job.set_hosts(hosts(2, 3))
        first_step_after(job, t, lambda e: e['size'] == 2, 'shrunk')
    job.stop()
    job.finish()
    resets = [e for e in job.events if e['event'] == 'reset' and e['worker'] == 0]
    expect(len(resets) == 2 * n, 'worker 0 reset %d times, expected %d' % (len(resets), 2 * n))
    # After the first cycle everything is warm. A thread that is just ending
    # may be counted once; a leak grows with every cycle, so the last cycles
    # would exceed the early ones.
    at_size2 = [(e['fds'], e['threads']) for e in resets if e['size'] == 2]
    early, late = at_size2[1:n // 2 + 1], at_size2[n // 2 + 1:]
    for i, what in ((0, 'fd'), (1, 'thread')):
        expect(max(c[i] for c in late) <= max(c[i] for c in early),
               '%s counts grow over cycles: %s' % (what, at_size2))
    print('fds/threads of worker 0 after each removal: %s' % at_size2)
    return {}
