import { ProgressEvent, UpdaterState } from '../core/types';

// What the upgrade page derives from the upgrade job's events (the deploy
// engine's, vcenter-plugin/internal/deploy/upgrade.go): the unit it is on,
// the step, and the version. Step keys are the engine's stored keys
// (upgrade/<version>/<svm or unit>/<step>), which it never renames.

export interface RollProgress {
  unit: number; // 1-based; 0 before the first unit
  units: number;
  svms: string; // the unit's SVMs, as the engine names them
  step: string; // the current step, said for an admin
  version: string; // from the step keys; '' until one is seen
}

const unitLine = /^unit (\d+) of (\d+): (.*)$/;
const stepLine = /^upgrade\/([^/]+)\/([^/]+)\/(maintenance|order|await|exit|resync): (started|done|already done)\s*(.*)$/;

// stepText says a step event's message the way an admin reads it.
export function stepText(message: string): string {
  const m = stepLine.exec(message);
  if (!m) {
    return message;
  }
  const [, , who, step, phase, detail] = m;
  const what: Record<string, string> = {
    maintenance: `SDSs of ${who} entering instant maintenance`,
    order: `ordering ${who} to upgrade`,
    await: `${who} downloading and installing`,
    exit: `SDSs of ${who} leaving maintenance`,
    resync: 'waiting for the data to resync',
  };
  const base = what[step] ?? `${step} of ${who}`;
  if (phase === 'started') {
    return base + '…';
  }
  return `${base}: ${phase}${detail ? ` (${detail})` : ''}`;
}

// rollProgress reads the events of one run of the job (those at or after
// its start), oldest first.
export function rollProgress(events: ProgressEvent[]): RollProgress {
  const out: RollProgress = { unit: 0, units: 0, svms: '', step: '', version: '' };
  for (const e of events) {
    const u = unitLine.exec(e.message);
    if (u) {
      out.unit = Number(u[1]);
      out.units = Number(u[2]);
      out.svms = u[3];
      out.step = '';
      continue;
    }
    const s = stepLine.exec(e.message);
    if (s) {
      out.version = s[1];
    }
    out.step = stepText(e.message);
  }
  return out;
}

// stateLabel is the Clarity label class of an updater's state.
export function stateLabel(state: UpdaterState | string): string {
  switch (state) {
    case 'done':
      return 'label-success';
    case 'downloading':
    case 'installing':
      return 'label-info';
    case 'failed':
    case 'rolled-back':
      return 'label-danger';
    default:
      return '';
  }
}

// compareVersions orders MAJOR.MINOR.PATCH versions numerically ('' is
// the lowest; a part that is not a number compares as 0).
export function compareVersions(a: string, b: string): number {
  if (!a || !b) {
    return a ? 1 : b ? -1 : 0;
  }
  const pa = a.split('.').map((x) => Number(x) || 0);
  const pb = b.split('.').map((x) => Number(x) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) {
      return Math.sign(d);
    }
  }
  return 0;
}
