import { Problem } from './types';

// The wizard's pages, in order. Each plan validation problem belongs to
// the page where the admin can fix it (stepFor).
export const STEPS = ['system', 'hosts', 'roles', 'domains', 'pool', 'devices', 'network', 'review'] as const;
export type Step = (typeof STEPS)[number];

export const STEP_TITLES: Record<Step, string> = {
  system: 'System',
  hosts: 'Hosts',
  roles: 'Roles',
  domains: 'Protection domain and fault sets',
  pool: 'Storage pool',
  devices: 'Devices',
  network: 'Networks and addresses',
  review: 'Review',
};

// stepFor maps a problem's JSON path (plan.Problem.Field) to its page.
// Problems on "hosts" as a whole are about role counts, fault sets or SDS
// numbers: their message says which.
export function stepFor(p: Problem): Step {
  const f = p.field;
  if (f === 'version' || f === 'system' || f === 'datacenter' || f === 'template' || f === 'ssh_authorized_key') {
    return 'system';
  }
  if (f === 'protection_domain' || /^hosts\[\d+\]\.fault_set$/.test(f)) {
    return 'domains';
  }
  if (f.startsWith('storage_pool') || f === 'maintenance_mode') {
    return 'pool';
  }
  if (f.startsWith('network') || f.startsWith('iscsi') || /^hosts\[\d+\]\.(svm_ip|data_ip|vmkernel_ip)$/.test(f)) {
    return 'network';
  }
  if (/^hosts\[\d+\]\.devices/.test(f)) {
    return 'devices';
  }
  if (/^hosts\[\d+\]\.roles$/.test(f)) {
    return 'roles';
  }
  if (/^hosts\[\d+\]\.name$/.test(f)) {
    return 'hosts';
  }
  if (f === 'hosts') {
    if (/fault set|failure domain/i.test(p.message)) {
      return 'domains';
    }
    if (/choose the ESXi hosts/i.test(p.message)) {
      return 'hosts';
    }
    return 'roles';
  }
  return 'review';
}

// problemsFor returns the problems that belong to step.
export function problemsFor(ps: Problem[], step: Step): Problem[] {
  return ps.filter((p) => stepFor(p) === step);
}

// hostIndex is the plan host index a problem's field names, or -1.
export function hostIndex(p: Problem): number {
  const m = /^hosts\[(\d+)\]/.exec(p.field);
  return m ? Number(m[1]) : -1;
}
