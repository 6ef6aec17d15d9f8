"""What the elastic scenarios share: a troupe-run job on simulated hosts
whose workers' lines are read as they come (Job), the checks of what they
logged, and two network-namespace hosts (TwoHosts, also used by
tests/multiproc). A failed check is recorded in `failures` and printed."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time


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
