import { STEPS, problemsFor, stepFor } from './problems';
import { Problem } from './types';

const err = (field: string, message = 'x'): Problem => ({ severity: 'error', field, message });

describe('stepFor', () => {
  it.each([
    ['system', 'system'],
    ['template', 'system'],
    ['hosts[1].name', 'hosts'],
    ['hosts[0].roles', 'roles'],
    ['protection_domain', 'domains'],
    ['hosts[2].fault_set', 'domains'],
    ['storage_pool.spare_percent', 'pool'],
    ['hosts[0].devices', 'devices'],
    ['hosts[3].devices[0].disk', 'devices'],
    ['network.cidr', 'network'],
    ['iscsi.portgroup', 'network'],
    ['hosts[1].svm_ip', 'network'],
    ['hosts[1].vmkernel_ip', 'network'],
  ])('%s belongs to %s', (field, step) => {
    expect(stepFor(err(field))).toBe(step);
  });

  it('sorts whole-plan host problems by what they say (validator messages)', () => {
    expect(stepFor(err('hosts', '2 MDM members is an even number: a split vote could stall the cluster; use 3 or 5'))).toBe('roles');
    expect(stepFor(err('hosts', 'no host has the gateway role: give it to at least one (two for availability)'))).toBe('roles');
    expect(stepFor(err('hosts', '2 SDS hosts have a fault set and 1 do not: give every SDS host a fault set, or none'))).toBe('domains');
    expect(stepFor(err('hosts', 'choose the ESXi hosts that run an SVM'))).toBe('hosts');
  });

  it('every step is reachable and filtered', () => {
    const ps = [err('system'), err('hosts[0].roles'), err('network.cidr')];
    expect(problemsFor(ps, 'roles')).toEqual([ps[1]]);
    expect(STEPS.at(-1)).toBe('review');
  });
});
