import { describe, expect, it } from 'vitest';
import { Device, Job, ProgressEvent } from '../core/types';
import { deviceJobs, drainOf, eta } from './devices';

const dev: Device = { id: 'd1', name: 'dev1', sds_id: 's1', pool_id: 'p1', path: '/dev/x', capacity: 1, state: 'removing' };
const ev = (seq: number, job: string, percent?: number, eta_seconds?: number): ProgressEvent => ({
  seq,
  time: '',
  job,
  level: 'info',
  step: 'drain',
  message: `m${seq}`,
  percent,
  eta_seconds,
});

describe('device jobs', () => {
  it('keeps the system’s device jobs, newest first', () => {
    const jobs: Job[] = [
      { name: 'device-add:c1/sds/naa.1', state: 'succeeded', started: '2026-01-01T00:00:01Z' },
      { name: 'device-remove:c1/dev1', state: 'running', started: '2026-01-01T00:00:02Z' },
      { name: 'device-remove:c2/dev1', state: 'running', started: '2026-01-01T00:00:03Z' },
      { name: 'volume:v', state: 'running', started: '2026-01-01T00:00:04Z' },
    ];
    expect(deviceJobs(jobs, 'c1').map((j) => j.name)).toEqual(['device-remove:c1/dev1', 'device-add:c1/sds/naa.1']);
  });

  it('shows the latest drain progress of a running removal only', () => {
    const job = 'device-remove:c1/dev1';
    const events = [ev(1, job), ev(2, job, 10, 40), ev(3, 'other', 90), ev(4, job, 35, 20), ev(5, job)];
    const running: Job[] = [{ name: job, state: 'running', started: '' }];
    expect(drainOf(running, events, 'c1', dev)?.percent).toBe(35);
    expect(drainOf(running, [], 'c1', dev)?.percent).toBe(0);
    expect(drainOf([{ name: job, state: 'succeeded', started: '' }], events, 'c1', dev)).toBeNull();
    expect(drainOf(running, events, 'c2', dev)).toBeNull();
  });

  it('says the time left in words', () => {
    expect(eta(undefined)).toBe('');
    expect(eta(12)).toBe(' · about 12 s left');
    expect(eta(600)).toBe(' · about 10 min left');
    expect(eta(7200)).toBe(' · about 2.0 h left');
  });
});
