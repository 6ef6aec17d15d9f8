"""elastic_scenarios.py TROUPE_RUN SCENARIO [RUNS]

Runs troupe-run's elastic mode on simulated hosts (loopback names
127.0.0.2, 127.0.0.3, ...; a discovery script that prints a file the test
rewrites) with elastic_train.py, changes the job while it trains, and checks
what the workers logged (one JSON line per step) and troupe-run's exit
status. Every wait is bounded. Prints PASS or the failed checks; with
`bench`, the median recovery times of RUNS runs."""

import atexit
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, 'elastic_train.py')
LINE = re.compile(r'^\[(\d+)\]<stdout>:(\{.*\})$')
failures = []


def expect(ok, what):
    if not ok:
        failures.append(what)
        print('FAIL: ' + what, flush=True)


class Job:
    """One troupe-run with a discovery script reading a hosts file."""

    def __init__(self, hosts, np, flags=(), train=(), script=None, limit=90, prefix=()):
        self.dir = tempfile.mkdtemp(prefix='troupe-elastic-')
        self.hosts_file = os.path.join(self.dir, 'hosts')
        self.set_hosts(hosts)
        script = script or 'cat ' + self.hosts_file
        cmd = [*prefix, sys.argv[1], '-np', str(np), '--host-discovery-script', script,
               '--timeout', str(limit), *flags, '/usr/bin/python3', TRAIN, *train]
        self.events, self.lines, self.notes = [], [], []
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def path(self, name):
        return os.path.join(self.dir, name)

    def set_hosts(self, hosts):
        tmp = self.hosts_file + '.tmp'
        with open(tmp, 'w') as f:
            f.write(''.join(h + '\n' for h in hosts))
        os.replace(tmp, self.hosts_file)

    def _read(self):
        for line in self.proc.stdout:
            line = line.rstrip('\n')
            m = LINE.match(line)
            with self.cond:
                self.lines.append(line)
                if m:
                    self.events.append(json.loads(m.group(2)))
                elif line.startswith('troupe-run: '):
                    self.notes.append((time.time(), line))
                self.cond.notify_all()

    def wait_for(self, pred, what, timeout=30):
        """The first event (in log order) matching `pred`."""
        deadline = time.time() + timeout
        with self.cond:
            while True:
                for e in self.events:
                    if pred(e):
                        return e
                left = deadline - time.time()
                if left <= 0 or self.proc.poll() is not None and not self.reader.is_alive():
                    expect(False, 'no event: ' + what)
                    print("\n".join(self.lines[-80:]))
                    self.stop()
                    raise TimeoutError(what)
                self.cond.wait(min(left, 0.5))

    def stop(self):
        """SIGTERM to troupe-run, which stops its workers."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def finish(self, timeout=60):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            rc = self.proc.wait()
            expect(False, 'troupe-run did not finish in %d s' % timeout)
        self.reader.join(10)
        return rc

    def noted(self, text, after):
        """When troupe-run printed a line containing `text` after `after`."""
        with self.cond:
            return next(t for t, line in self.notes if t > after and text in line)

    def output(self):
        with self.cond:
            return '\n'.join(self.lines)

    def steps(self):
        with self.cond:
            return [e for e in self.events if e['event'] == 'step']


def check_checksums(job):
    """Ranks of one membership epoch agree on the parameters after each step."""
    seen = {}
    for e in job.steps():
        seen.setdefault((e['membership'], e['epoch'], e['batch']), set()).add(e['checksum'])
    bad = {k: v for k, v in seen.items() if len(v) > 1}
    expect(not bad, 'ranks disagree on parameter checksums at %s' % sorted(bad)[:3])


def check_ranks(job):
    """In every membership epoch the ranks are below the size, each once, and the
    environment says the same after a reset."""
    by_epoch = {}
    for e in job.steps():
        by_epoch.setdefault(e['membership'], {})[e['worker']] = (e['rank'], e['size'])
    for membership, workers in by_epoch.items():
        ranks = sorted(r for r, _ in workers.values())
        sizes = {s for _, s in workers.values()}
        expect(len(sizes) == 1 and len(set(ranks)) == len(ranks) and
               all(0 <= r < max(sizes) for r in ranks),
               'membership %d: ranks %s of sizes %s' % (membership, ranks, sizes))
    for e in job.events:
        if e['event'] == 'reset':
            expect(e['env_rank'] == e['rank'] and e['env_size'] == e['size'],
                   'RANK/WORLD_SIZE not rewritten: %s' % e)


def check_every_index(job, dataset_size):
    """Graceful changes lose and repeat nothing: every index of epoch 0 is
    processed exactly once, but for the padding of the last membership's
    shards (fewer than its size)."""
    counts = {}
    for e in job.steps():
        if e['epoch'] == 0:
            for i in e['indices']:
                counts[i] = counts.get(i, 0) + 1
    missing = set(range(dataset_size)) - set(counts)
    expect(not missing, 'indices never processed: %s' % sorted(missing)[:10])
    repeated = sum(c - 1 for c in counts.values())
    last_size = job.steps()[-1]['size']
    expect(repeated < last_size, '%d repeated indices (padding allows %d): %s' % (
        repeated, last_size - 1, sorted(i for i, c in counts.items() if c > 1)[:10]))


def hosts(*last_octets):
    return ['127.0.0.%d' % n for n in last_octets]


def first_step_after(job, t, pred=lambda e: True, what='step'):
    return job.wait_for(lambda e: e['event'] == 'step' and e['time'] > t and pred(e), what)


def training_step(job, worker):
    """A step of `worker` past its first few: it trains with the others."""
    return job.wait_for(
        lambda e: e['event'] == 'step' and e['worker'] == worker and e['batch'] >= 3,
        'worker %d trains' % worker)


def survivors_resume(job, sig):
    """Sends `sig` to worker 2 once it trains; returns the seconds until
    the survivors train at size 2."""
    victim = training_step(job, 2)
    t0 = time.time()
    os.kill(victim['pid'], sig)
    again = first_step_after(job, t0, lambda e: e['membership'] >= 1 and e['size'] == 2,
                             'survivors train at size 2')
    return again['time'] - t0


# Scenarios. Each returns measured times (seconds) by name.

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


def free_base(count):
    """A base port whose `count` consecutive loopback ports are free now."""
    for base in range(22000 + os.getpid() % 4000, 30000, 7):
        socks = [socket.socket() for _ in range(count)]
        try:
            for i, sock in enumerate(socks):
                sock.bind(('127.0.0.1', base + i))
            return base
        except OSError:
            pass
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError('no %d free ports in a row' % count)


def scrape(port):
    """Samples of GET /metrics: {'name{labels}': value}."""
    with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port, timeout=5) as reply:
        text = reply.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith('#'):
            name, value = line.rsplit(' ', 1)
            samples[name] = float(value)
    return samples


def host_states(samples):
    """(active, blacklisted, cooling down) of troupe_elastic_hosts."""
    return tuple(samples.get('troupe_elastic_hosts{state="%s"}' % state)
                 for state in ('active', 'blacklisted', 'cooling_down'))


def metrics():
    """A worker is killed: each survivor's /metrics counts one reset, by the
    reason it saw (peer_lost) and outcome ok, two rendezvous (init and the
    reset), and shows the epoch it trains in and the hosts by state (the
    killed worker's blacklisted); its timeline holds the reset's span and
    the new epoch's marker; troupe-run counts a failure reset and the same
    hosts."""
    base = free_base(4)
    trace = tempfile.mkdtemp(prefix='troupe-elastic-trace-')
    atexit.register(shutil.rmtree, trace, True)
    job = Job(hosts(2, 3, 4), np=3,
              flags=['--min-np', '2', '--metrics-port', str(base),
                     '--timeline-filename', os.path.join(trace, 'trace.json')],
              train=['--dataset-size', '1500', '--step-sleep', '0.02'])
    victim = training_step(job, 2)
    before = scrape(base + 1)
    expect(before.get('troupe_resets_total{reason="peer_lost"}') == 0 and
           before.get('troupe_membership_epoch') == 0, 'no reset before the kill')
    expect(host_states(before) == (3, 0, 0),
           'worker 0: 3 active hosts before the kill, got %s' % (host_states(before),))
    os.kill(victim['pid'], signal.SIGKILL)
    t0 = time.time()
    again = {w: first_step_after(job, t0, lambda e, w=w: e['worker'] == w and e['size'] == 2,
                                 'worker %d trains at size 2' % w)
             for w in (0, 1)}
    for w, step in again.items():
        now = scrape(base + 1 + w)   # first membership: worker id = machine-local rank
        print('worker %d after the reset: %s' % (
            w, {k: v for k, v in now.items() if 'reset' in k and 'bucket' not in k}))
        expect(now.get('troupe_resets_total{reason="peer_lost"}') == 1 and
               now.get('troupe_resets_total{reason="hosts_updated"}') == 0 and
               now.get('troupe_resets_total{reason="requested"}') == 0,
               'worker %d: one peer_lost reset counted' % w)
        expect(now.get('troupe_reset_duration_seconds_count{outcome="ok"}') == 1,
               'worker %d: one reset timed as ok' % w)
        expect(now.get('troupe_rendezvous_duration_seconds_count') == 2,
               'worker %d: two rendezvous (init, reset)' % w)
        expect(now.get('troupe_membership_epoch') == step['membership'] >= 1,
               'worker %d: epoch gauge %s, trains in epoch %d' % (
                   w, now.get('troupe_membership_epoch'), step['membership']))
        expect(now.get('troupe_world_size') == 2, 'worker %d: world size 2' % w)
        expect(host_states(now) == (2, 1, 0),
               'worker %d: hosts active 2, blacklisted 1, cooling down 0 after the kill, got %s'
               % (w, host_states(now)))
    launcher = scrape(base)
    expect(host_states(launcher) == (2, 1, 0),
           'troupe-run: hosts 2 / 1 / 0, got %s' % (host_states(launcher),))
    expect(launcher.get('troupe_elastic_resets_total{reason="failure"}') == 1,
           'troupe-run counts one failure reset')
    rc = job.finish()
    expect(rc == 0, 'exit status %d, expected 0' % rc)
    for w, step in again.items():
        path = os.path.join(trace, 'trace.%d.json' % w)
        with open(path) as f:
            events = json.load(f)
        rows = {e['pid']: e['args']['name'] for e in events if e['name'] == 'process_name'}
        spans = [e['ph'] for e in events
                 if e['name'] == 'RESET_PEER_LOST' and rows.get(e['pid']) == 'membership']
        marks = [e['name'] for e in events if e['name'].startswith('MEMBERSHIP_EPOCH_')]
        expect(spans == ['B', 'E'], '%s: one RESET_PEER_LOST span, got %s' % (path, spans))
        expect(marks == ['MEMBERSHIP_EPOCH_0', 'MEMBERSHIP_EPOCH_%d' % step['membership']],
               '%s: epoch markers %s' % (path, marks))
    return {}


class Skip(Exception):
    """The scenario cannot run here (exit status 77)."""


class TwoHosts:
    """Two simulated hosts: network namespaces A (troupe-run and its side's
    workers) and B, joined by a veth pair whose ends are named tp0 in both,
    10.231.7.1/30 in A and 10.231.7.2/30 in B. The addresses live only in
    these namespaces, which this object creates and, with every process in
    them, removes."""

    A, B = '10.231.7.1', '10.231.7.2'

    def __init__(self):
        tag = os.getpid() % 10000000
        self.a, self.b = 'troupe-%d-a' % tag, 'troupe-%d-b' % tag
        self.veth = ('tpa%d' % tag, 'tpb%d' % tag)
        self.made = []

    @staticmethod
    def ip(*args):
        done = subprocess.run(['ip', *args], capture_output=True, text=True, timeout=10)
        if done.returncode != 0:
            raise RuntimeError('ip %s: %s' % (' '.join(args), done.stderr.strip()))

    def __enter__(self):
        if os.geteuid() != 0:
            raise Skip('network namespaces need root')
        if not shutil.which('ip'):
            raise Skip('no ip(8) (iproute2)')
        try:
            self.ip('netns', 'add', self.a)
        except RuntimeError as e:
            raise Skip('ip netns unavailable: %s' % e)
        self.made.append(self.a)
        try:
            self.ip('netns', 'add', self.b)
            self.made.append(self.b)
            self.ip('link', 'add', self.veth[0], 'type', 'veth', 'peer', 'name', self.veth[1])
            for ns, end, addr in ((self.a, self.veth[0], self.A), (self.b, self.veth[1], self.B)):
                self.ip('link', 'set', end, 'netns', ns)
                self.ip('-n', ns, 'link', 'set', end, 'name', 'tp0')
                self.ip('-n', ns, 'addr', 'add', addr + '/30', 'dev', 'tp0')
                self.ip('-n', ns, 'link', 'set', 'tp0', 'up')
                self.ip('-n', ns, 'link', 'set', 'lo', 'up')
        except Exception:
            self.__exit__()
            raise
        return self

    def cut(self):
        """The link goes down on A's side: no RST, B's packets are lost."""
        self.ip('-n', self.a, 'link', 'set', 'tp0', 'down')

    def __exit__(self, *exc):
        # The namespace's veth end and its peer go with it.
        for ns in reversed(self.made):
            pids = subprocess.run(['ip', 'netns', 'pids', ns], capture_output=True, text=True,
                                  timeout=10).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            subprocess.run(['ip', 'netns', 'del', ns], timeout=10)
        self.made = []


def partition(heartbeat=2):
    """Host B is cut off (its link down, no RST): troupe-run and the two
    workers on host A lose it after the heartbeat timeout, reset and train
    on at size 2 with equal parameters; B's worker is failed and its host
    blacklisted. Workers start in their host's namespace through
    --spawn-command; ranks and the store listen on tp0's address."""
    with TwoHosts() as net:
        spawn = ('case $TROUPE_SPAWN_HOST in %s) ns=%s;; *) ns=%s;; esac; ip netns exec $ns'
                 % (net.A, net.a, net.b))
        job = Job([net.A + ':2', net.B + ':1'], np=3, prefix=['ip', 'netns', 'exec', net.a],
                  flags=['--min-np', '2', '--spawn-command', spawn, '--network-interface', 'tp0',
                         '--heartbeat-timeout-seconds', str(heartbeat),
                         '--gloo-timeout-seconds', '4'],
                  train=['--dataset-size', '1500', '--step-sleep', '0.02'])
        job.wait_for(lambda e: e['event'] == 'step' and e['worker'] == 2 and e['batch'] >= 3,
                     'worker 2 trains on host B')
        t0 = time.time()
        net.cut()
        again = {w: first_step_after(job, t0, lambda e, w=w: e['worker'] == w and e['size'] == 2,
                                     'worker %d trains at size 2' % w)
                 for w in (0, 1)}
        rc = job.finish()
    expect(rc == 0, 'exit status %d, expected 0' % rc)
    late = max(e['time'] for e in again.values()) - t0
    expect(late <= heartbeat + 4, 'survivors trained again %.1f s after the cut (heartbeat '
           'timeout %d s + 4 s allowed)' % (late, heartbeat))
    expect('host %s is blacklisted' % net.B in job.output(), 'host B blacklisted')
    after = [e for e in job.steps() if e['time'] > t0 + late]
    expect(after and all(e['size'] == 2 and e['worker'] in (0, 1) for e in after),
           'only host A trains after the cut')
    check_checksums(job)
    check_ranks(job)
    return {'partition_to_training': late}


ETCD = '/usr/bin/etcd'


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class Etcd:
    """One etcd member on loopback (free ports, a temporary data directory),
    killed and removed on exit. `rendezvous` is troupe-run's --rendezvous
    for it; keys go under troupe-test/."""

    def __enter__(self):
        if not os.access(ETCD, os.X_OK):
            raise Skip('no %s (apt-get install etcd-server)' % ETCD)
        self.dir = tempfile.mkdtemp(prefix='troupe-etcd-')
        client = 'http://127.0.0.1:%d' % free_port()
        peer = 'http://127.0.0.1:%d' % free_port()
        self.url = client
        self.rendezvous = 'etcd' + client[len('http'):] + '/troupe-test/'
        with open(os.path.join(self.dir, 'log'), 'w') as log:
            self.proc = subprocess.Popen(
                [ETCD, '--name', 't', '--data-dir', os.path.join(self.dir, 'data'),
                 '--listen-client-urls', client, '--advertise-client-urls', client,
                 '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
                 '--initial-cluster', 't=' + peer], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while True:
            try:
                self.keys()
                return self
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    self.__exit__()
                    raise RuntimeError('etcd did not come up; its log: %s' % self.dir)
                time.sleep(0.1)

    def keys(self):
        """Every key in etcd, sorted."""
        import base64
        body = json.dumps({'key': base64.b64encode(b'\0').decode(),
                           'range_end': base64.b64encode(b'\0').decode(),
                           'keys_only': True}).encode()
        request = urllib.request.Request(self.url + '/v3/kv/range', data=body,
                                         headers={'Content-Type': 'application/json'})
        with urllib.request.urlopen(request, timeout=5) as reply:
            kvs = json.load(reply).get('kvs', [])
        return sorted(base64.b64decode(kv['key']).decode(errors='replace') for kv in kvs)

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, True)


def job_prefixes(keys):
    """The job ids under troupe-test/ in etcd's keys."""
    return {k.split('/')[1] for k in keys if k.startswith('troupe-test/')}


def etcd_static():
    """A static job of 3 ranks whose rendezvous is an etcd: every rank
    reduces with the others, the job's keys are in etcd, and troupe-run's
    launcher key is gone after the job."""
    script = ('import torch, troupe.torch as hvd; hvd.init(); '
              's = hvd.allreduce(torch.tensor([hvd.rank() + 1.0]), op=hvd.Sum); '
              'print("rank %d of %d: sum %d" % (hvd.rank(), hvd.size(), s.item()))')
    with Etcd() as etcd:
        done = subprocess.run([sys.argv[1], '-np', '3', '--rendezvous', etcd.rendezvous,
                               '--timeout', '60', '/usr/bin/python3', '-c', script],
                              capture_output=True, text=True, timeout=90)
        keys = etcd.keys()
    expect(done.returncode == 0, 'exit status %d: %s' % (done.returncode, done.stderr[-2000:]))
    for r in range(3):
        line = '[%d]<stdout>:rank %d of 3: sum 6' % (r, r)
        expect(line in done.stdout.splitlines(), 'output has %r: %s' % (line, done.stdout))
    jobs = job_prefixes(keys)
    expect(len(jobs) == 1, 'one job\'s keys in etcd: %s' % keys[:20])
    for job in jobs:
        expect(all('troupe-test/%s/endpoint/%d' % (job, r) in keys for r in range(3)),
               'every rank\'s endpoint in etcd: %s' % keys[:20])
        expect('troupe-test/%s/launcher' % job not in keys,
               'the launcher key removed after the job: %s' % keys[:20])
    return {}


def etcd_elastic():
    """The kill scenario with the rendezvous in etcd: the survivors train
    again at size 2, and the plans of both epochs are in etcd."""
    with Etcd() as etcd:
        took = kill(['--rendezvous', etcd.rendezvous])
        keys = etcd.keys()
    jobs = job_prefixes(keys)
    expect(len(jobs) == 1, 'one job\'s keys in etcd: %s' % keys[:20])
    for job in jobs:
        for key in ('plan/0', 'plan/1', 'epoch', 'hosts'):
            expect('troupe-test/%s/%s' % (job, key) in keys,
                   'etcd holds %s: %s' % (key, keys[:30]))
    return {'etcd_kill_to_training': took['kill_to_training']}


FAKE_SSH = """#!/usr/bin/python3
# Stands in for ssh: records its arguments (a JSON line) and runs the remote
# command here, as the remote host's shell would.
import json, os, sys
with open(os.environ['FAKE_SSH_LOG'], 'a') as log:
    log.write(json.dumps(sys.argv[1:]) + '\\n')
os.execv('/bin/sh', ['sh', '-c', sys.argv[-1]])
"""


def fake_ssh():
    """Puts a fake `ssh` first on PATH (for this process and the jobs it
    starts); returns the identity file to pass and the log of its calls."""
    d = tempfile.mkdtemp(prefix='troupe-ssh-')
    atexit.register(shutil.rmtree, d, True)
    with open(os.path.join(d, 'ssh'), 'w') as f:
        f.write(FAKE_SSH)
    os.chmod(os.path.join(d, 'ssh'), 0o755)
    os.environ['PATH'] = d + ':' + os.environ['PATH']
    os.environ['FAKE_SSH_LOG'] = os.path.join(d, 'calls')
    return os.path.join(d, 'id_test'), os.path.join(d, 'calls')


def check_ssh_calls(log, identity, hosts, needed):
    """Every worker was started over ssh with Horovod's options, the port and
    identity given, on its host, and a remote command that carries the
    `needed` variables but no secret."""
    with open(log) as f:
        calls = [json.loads(line) for line in f]
    expect(sorted(c[-2] for c in calls) == sorted(hosts),
           'ssh called for hosts %s, expected %s' % ([c[-2] for c in calls], hosts))
    for c in calls:
        expect(c[:-2] == ['-o', 'PasswordAuthentication=no', '-o', 'StrictHostKeyChecking=accept-new',
                          '-o', 'BatchMode=yes', '-p', '2222', '-i', identity, '--'],
               'ssh options: %s' % c[:-2])
        remote = c[-1]
        expect(remote.startswith("cd '%s' >/dev/null 2>&1; exec 3<&0 </dev/null; exec env "
                                 % os.getcwd()), 'remote command prefix: %s' % remote[:120])
        expect(all(("'%s=" % v) in remote for v in needed) and ' TROUPE_SECRET_FD=3 ' in remote,
               'remote command carries %s and TROUPE_SECRET_FD=3' % needed)
        expect('SECRET_KEY' not in remote, 'no secret on the command line')


def ssh_static():
    """Static mode, two hosts that are not this machine: troupe-run starts
    both ranks over (fake) ssh and they reduce together."""
    identity, log = fake_ssh()
    script = ('import torch, troupe.torch as hvd; hvd.init(); '
              's = hvd.allreduce(torch.tensor([hvd.rank() + 1.0]), op=hvd.Sum); '
              'print("rank %d of %d on %s: sum %d" % (hvd.rank(), hvd.size(), '
              '__import__("os").environ["HOROVOD_HOSTNAME"], s.item()))')
    done = subprocess.run([sys.argv[1], '-np', '2', '-H', 'node-a:1,node-b:1',
                           '--network-interface', 'lo', '--ssh-port', '2222',
                           '--ssh-identity-file', identity, '--timeout', '60',
                           '/usr/bin/python3', '-c', script],
                          capture_output=True, text=True, timeout=90)
    expect(done.returncode == 0, 'exit status %d: %s' % (done.returncode, done.stderr[-2000:]))
    for line in ('[0]<stdout>:rank 0 of 2 on node-a: sum 3', '[1]<stdout>:rank 1 of 2 on node-b: sum 3'):
        expect(line in done.stdout.splitlines(), 'output has %r: %s' % (line, done.stdout))
    check_ssh_calls(log, identity, ['node-a', 'node-b'],
                    ['HOROVOD_RANK', 'TROUPE_STORE_ADDR', 'TROUPE_NETWORK_INTERFACE'])
    return {}


def ssh_elastic():
    """Elastic mode on two discovered hosts that are not this machine: both
    workers start over (fake) ssh and train to the end."""
    identity, log = fake_ssh()
    job = Job(['node-a', 'node-b'], np=2,
              flags=['--min-np', '2', '--network-interface', 'lo', '--ssh-port', '2222',
                     '--ssh-identity-file', identity],
              train=['--dataset-size', '120', '--step-sleep', '0.01'])
    rc = job.finish()
    expect(rc == 0, 'exit status %d, expected 0' % rc)
    done = [e for e in job.events if e['event'] == 'done']
    expect(len(done) == 2 and {e['size'] for e in done} == {2},
           'both workers finish at size 2: %s' % done)
    check_checksums(job)
    check_ssh_calls(log, identity, ['node-a', 'node-b'],
                    ['TROUPE_ELASTIC', 'TROUPE_WORKER_ID', 'TROUPE_STORE_ADDR'])
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
