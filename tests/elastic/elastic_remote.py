"""Elastic scenarios beyond loopback hosts on one network: a network
partition between two namespace hosts, the rendezvous in an etcd, workers
started over (fake) ssh. Each returns measured times (seconds) by name."""

import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from elastic_harness import (Job, Skip, TwoHosts, check_checksums, check_ranks, expect,
                             first_step_after)
from elastic_membership import kill


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
