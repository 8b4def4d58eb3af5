import { eta, latency, mergeHistory, niceMax } from './perf';
import { StatPoint } from './types';

const rate = (iops: number) => ({ iops, bytes_per_second: iops * 4096, latency_mean_us: 300, latency_p99_us: 1500 });
const pt = (t: string, iops: number): StatPoint => ({ timestamp: t, read: rate(iops), write: rate(iops / 2), throttled_seconds: 0 });

describe('performance figures', () => {
  it('merges answers by timestamp, newest answer wins, within the window', () => {
    const now = Date.parse('2026-11-26T12:10:00Z');
    const held = [pt('2026-11-26T12:04:00Z', 1), pt('2026-11-26T12:06:00Z', 2), pt('2026-11-26T12:09:55Z', 3)];
    const got = mergeHistory(held, [pt('2026-11-26T12:09:55Z', 30), pt('2026-11-26T12:10:00Z', 4)], 5 * 60_000, now);
    expect(got.map((p) => p.read.iops)).toEqual([2, 30, 4]);
  });
  it('shows latency and ETAs in words an admin reads', () => {
    expect(latency(310.4)).toBe('310 µs');
    expect(latency(1830)).toBe('1.8 ms');
    expect(latency(25_000)).toBe('25 ms');
    expect(eta(42)).toBe('under a minute');
    expect(eta(250)).toBe('about 4 min');
    expect(eta(7800)).toBe('about 2 h 10 min');
  });
  it('rounds chart scales to 1, 2, 5', () => {
    expect(niceMax(0)).toBe(1);
    expect(niceMax(1234)).toBe(2000);
    expect(niceMax(4.2e6)).toBe(5e6);
    expect(niceMax(700)).toBe(1000);
  });
});
