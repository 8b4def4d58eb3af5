import { InventoryHost, Plan, PlanHost, Role } from '../core/types';

// Pure plan edits the wizard makes (unit-tested without a browser).

// roleBlocker says why host cannot take role, or null when it can.
export function roleBlocker(h: InventoryHost | undefined, ph: PlanHost, role: Role): string | null {
  if (!h) {
    return 'host not found in vCenter';
  }
  if (h.connection_state !== 'connected') {
    return `host is ${h.connection_state}: reconnect it in vCenter`;
  }
  if (h.in_maintenance) {
    return 'host is in maintenance mode: exit it first';
  }
  if (!(h.datastores ?? []).some((d) => d.local)) {
    return 'no local datastore for the SVM';
  }
  if (role === 'sds' && !(h.disks ?? []).some((d) => d.candidate) && !(h.pci_devices ?? []).some((p) => p.passthrough_enabled && !p.used_by)) {
    return 'no free local disk or passthrough device';
  }
  if (role === 'mdm' && ph.roles.includes('tiebreaker')) {
    return 'already a tie-breaker (a host is one or the other)';
  }
  if (role === 'tiebreaker' && ph.roles.includes('mdm')) {
    return 'already an MDM voter (a host is one or the other)';
  }
  return null;
}

export function toggleRole(ph: PlanHost, role: Role, on: boolean): void {
  const has = ph.roles.includes(role);
  if (on && !has) {
    ph.roles = [...ph.roles, role];
  } else if (!on && has) {
    ph.roles = ph.roles.filter((r) => r !== role);
    if (role === 'sds') {
      ph.devices = [];
    }
  }
}

// mdmSummary counts MDM members as the validator does.
export function mdmSummary(p: Plan): { voters: number; tiebreakers: number; text: string } {
  const voters = p.hosts.filter((h) => h.roles.includes('mdm')).length;
  const tiebreakers = p.hosts.filter((h) => h.roles.includes('tiebreaker')).length;
  const n = voters + tiebreakers;
  const ok = (n === 3 || n === 5) && tiebreakers < voters;
  return {
    voters,
    tiebreakers,
    text: `${n} MDM members (${voters} voters + ${tiebreakers} tie-breakers)${ok ? '' : ': use 3 or 5, fewer tie-breakers than voters'}`,
  };
}

// setHosts keeps the plan's hosts to names (in inventory order), adding
// new ones with no role (an iSCSI client only until roles are given).
export function setHosts(p: Plan, names: string[]): void {
  const by = new Map(p.hosts.map((h) => [h.name, h]));
  p.hosts = names.map((n) => by.get(n) ?? { name: n, roles: [] });
}

// fillAddresses gives each SVM host consecutive addresses.
export function fillAddresses(p: Plan, field: 'svm_ip' | 'vmkernel_ip', list: string[]): void {
  let i = 0;
  for (const h of p.hosts) {
    if (field === 'svm_ip' && h.roles.length === 0) {
      delete h.svm_ip;
      continue;
    }
    h[field] = list[i++];
  }
}

// planJSON is the plan as cairn-install and the Ansible collection read it.
export function planJSON(p: Plan): string {
  return JSON.stringify(p, null, 2) + '\n';
}
