import { bytes } from './format';
import { StatPoint } from './types';

// Figures of the performance charts and the rebuild panel, as text.

export function iops(n: number): string {
  return `${Math.round(n).toLocaleString('en-US')} IOPS`;
}

export function bandwidth(n: number): string {
  return `${bytes(n)}/s`;
}

// latency in microseconds: "310 µs", "1.8 ms".
export function latency(us: number): string {
  if (us < 1000) {
    return `${Math.round(us)} µs`;
  }
  return `${(us / 1000).toFixed(us < 10_000 ? 1 : 0)} ms`;
}

// eta in seconds: "under a minute", "about 4 min", "about 2 h 10 min".
export function eta(seconds: number): string {
  if (seconds < 60) {
    return 'under a minute';
  }
  const min = Math.round(seconds / 60);
  if (min < 60) {
    return `about ${min} min`;
  }
  const h = Math.floor(min / 60);
  return `about ${h} h${min % 60 ? ` ${min % 60} min` : ''}`;
}

// mergeHistory adds the points of a new answer to what the chart holds:
// one point per timestamp (the newest answer wins), oldest first, none
// older than windowMs before now.
export function mergeHistory(held: StatPoint[], incoming: StatPoint[], windowMs: number, now: number): StatPoint[] {
  const byTime = new Map<number, StatPoint>();
  for (const p of [...held, ...incoming]) {
    byTime.set(Date.parse(p.timestamp), p);
  }
  return [...byTime.entries()]
    .filter(([t]) => Number.isFinite(t) && t >= now - windowMs)
    .sort((a, b) => a[0] - b[0])
    .map(([, p]) => p);
}

// niceMax rounds a chart's top up to 1, 2 or 5 times a power of ten.
export function niceMax(v: number): number {
  if (!(v > 0)) {
    return 1;
  }
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) {
    if (v <= m * p) {
      return m * p;
    }
  }
  return 10 * p;
}
