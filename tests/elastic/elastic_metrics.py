"""The metrics scenario: what the survivors' and troupe-run's /metrics
and the timeline say about a reset after a worker is killed."""

import atexit
import json
import os
import shutil
import signal
import socket
import tempfile
import time
import urllib.request

from elastic_harness import Job, expect, first_step_after, hosts, training_step


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
