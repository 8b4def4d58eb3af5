import { describe, expect, it } from 'vitest';
import { ProgressEvent } from '../core/types';
import { compareVersions, rollProgress, stateLabel, stepText } from './progress';

function ev(seq: number, message: string): ProgressEvent {
  return { seq, time: '2026-11-28T22:00:00Z', job: 'upgrade:cairn1', level: 'info', step: 'upgrade', message };
}

describe('upgrade progress', () => {
  it('follows the unit and step the engine is on', () => {
    const p = rollProgress([
      ev(1, 'unit 1 of 3: cairn-cairn1-esx-04'),
      ev(2, 'upgrade/0.2.0/cairn-cairn1-esx-04/maintenance: started'),
      ev(3, 'upgrade/0.2.0/cairn-cairn1-esx-04/maintenance: done instant maintenance: sds-esx-04'),
      ev(4, 'unit 2 of 3: cairn-cairn1-esx-01'),
      ev(5, 'upgrade/0.2.0/cairn-cairn1-esx-01/await: started'),
    ]);
    expect(p).toEqual({ unit: 2, units: 3, svms: 'cairn-cairn1-esx-01', step: 'cairn-cairn1-esx-01 downloading and installing…', version: '0.2.0' });
  });

  it('says a done step with its detail and leaves other messages as they are', () => {
    expect(stepText('upgrade/0.2.0/a,b/resync: done')).toBe('waiting for the data to resync: done');
    expect(stepText('upgrade/0.2.0/a/await: done running 0.2.0 after 3s')).toBe('a downloading and installing: done (running 0.2.0 after 3s)');
    expect(stepText('a: installing 0.2.0 (running 0.1.0)')).toBe('a: installing 0.2.0 (running 0.1.0)');
  });

  it('takes the version from the latest step', () => {
    expect(rollProgress([ev(1, 'upgrade/0.2.0/a/resync: done'), ev(2, 'unit 1 of 2: a'), ev(3, 'upgrade/0.3.0/a/maintenance: started')]).version).toBe('0.3.0');
  });

  it('knows nothing before the first unit', () => {
    expect(rollProgress([])).toEqual({ unit: 0, units: 0, svms: '', step: '', version: '' });
  });

  it('colours updater states', () => {
    expect(stateLabel('done')).toBe('label-success');
    expect(stateLabel('installing')).toBe('label-info');
    expect(stateLabel('rolled-back')).toBe('label-danger');
    expect(stateLabel('idle')).toBe('');
  });

  it('orders versions by number, not by text', () => {
    expect(compareVersions('0.10.0', '0.9.0')).toBe(1);
    expect(compareVersions('0.2.0', '0.3.0')).toBe(-1);
    expect(compareVersions('1.0.0', '1.0.0')).toBe(0);
    expect(compareVersions('', '0.1.0')).toBe(-1);
  });
});
