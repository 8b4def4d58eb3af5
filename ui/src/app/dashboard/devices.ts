import { Device, Job, ProgressEvent } from '../core/types';

// Device jobs of the plugin server (vcenter-plugin/internal/server/devices.go):
// device-add:<system>/<sds>/<disk>, device-remove:<system>/<device>.

export function deviceJobs(jobs: Job[], system: string): Job[] {
  return jobs
    .filter((j) => j.name.startsWith(`device-add:${system}/`) || j.name.startsWith(`device-remove:${system}/`))
    .sort((a, b) => b.started.localeCompare(a.started))
    .slice(0, 3);
}

// drainOf is the latest progress of the running drain of device v, or null.
export function drainOf(jobs: Job[], events: ProgressEvent[], system: string, v: Device): ProgressEvent | null {
  const name = `device-remove:${system}/${v.name || v.id}`;
  if (jobs.find((j) => j.name === name)?.state !== 'running') {
    return null;
  }
  for (let i = events.length - 1; i >= 0; i--) {
    if (events[i].job === name && events[i].percent !== undefined) {
      return events[i];
    }
  }
  return { seq: 0, time: '', job: name, level: 'info', step: 'drain', message: 'starting', percent: 0 };
}

// eta renders seconds left as " · about 2 min left" ('' when unknown).
export function eta(seconds: number | undefined): string {
  if (seconds === undefined || seconds === null) {
    return '';
  }
  if (seconds < 90) {
    return ` · about ${Math.max(1, Math.round(seconds))} s left`;
  }
  if (seconds < 5400) {
    return ` · about ${Math.round(seconds / 60)} min left`;
  }
  return ` · about ${(seconds / 3600).toFixed(1)} h left`;
}
