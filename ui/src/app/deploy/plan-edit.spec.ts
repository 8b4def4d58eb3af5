import { InventoryHost, Plan, PlanHost } from '../core/types';
import { fillAddresses, mdmSummary, planJSON, roleBlocker, setHosts, toggleRole } from './plan-edit';

const invHost = (over: Partial<InventoryHost> = {}): InventoryHost => ({
  name: 'esx-01',
  moref: 'host-1',
  version: '8.0.3',
  build: '1',
  connection_state: 'connected',
  in_maintenance: false,
  datastores: [{ name: 'local-01', moref: 'ds-1', type: 'VMFS', local: true, capacity: 1, free: 1 }],
  networks: [],
  disks: [{ canonical_name: 'naa.1', display_name: 'd', device_path: '/p', size: 1, ssd: true, local: true, candidate: true }],
  pci_devices: [],
  vms: [],
  ...over,
});

const plan = (hosts: PlanHost[]): Plan => ({
  version: 1,
  system: 's',
  datacenter: 'DC0',
  template: 't',
  protection_domain: 'pd1',
  storage_pool: { name: 'p', spare_percent: 10 },
  network: { portgroup: 'VM Network', cidr: '10.20.0.0/24' },
  iscsi: { portgroup: 'iSCSI', cidr: '10.30.0.0/24' },
  hosts,
});

describe('roleBlocker', () => {
  it('says why a host cannot take a role', () => {
    const ph: PlanHost = { name: 'esx-01', roles: [] };
    expect(roleBlocker(invHost(), ph, 'sds')).toBeNull();
    expect(roleBlocker(invHost({ disks: [] }), ph, 'sds')).toMatch(/no free local disk/);
    expect(roleBlocker(invHost({ in_maintenance: true }), ph, 'mdm')).toMatch(/maintenance mode/);
    expect(roleBlocker(invHost({ connection_state: 'disconnected' }), ph, 'gateway')).toMatch(/reconnect/);
    expect(roleBlocker(invHost({ datastores: [] }), ph, 'mdm')).toMatch(/no local datastore/);
    expect(roleBlocker(invHost(), { name: 'esx-01', roles: ['tiebreaker'] }, 'mdm')).toMatch(/tie-breaker/);
    expect(roleBlocker(undefined, ph, 'mdm')).toMatch(/not found/);
  });
});

describe('plan edits', () => {
  it('toggleRole drops devices with the sds role', () => {
    const h: PlanHost = { name: 'a', roles: ['sds', 'mdm'], devices: [{ disk: 'naa.1', mode: 'rdm' }] };
    toggleRole(h, 'sds', false);
    expect(h.roles).toEqual(['mdm']);
    expect(h.devices).toEqual([]);
    toggleRole(h, 'gateway', true);
    toggleRole(h, 'gateway', true);
    expect(h.roles).toEqual(['mdm', 'gateway']);
  });

  it('mdmSummary matches the validator rule', () => {
    const p = plan([
      { name: 'a', roles: ['mdm'] },
      { name: 'b', roles: ['mdm'] },
      { name: 'c', roles: ['tiebreaker'] },
    ]);
    expect(mdmSummary(p).text).toBe('3 MDM members (2 voters + 1 tie-breakers)');
    p.hosts[0].roles = [];
    expect(mdmSummary(p).text).toMatch(/use 3 or 5/);
  });

  it('setHosts keeps existing hosts and adds new ones without roles', () => {
    const p = plan([{ name: 'a', roles: ['mdm'] }]);
    setHosts(p, ['a', 'b']);
    expect(p.hosts).toEqual([{ name: 'a', roles: ['mdm'] }, { name: 'b', roles: [] }]);
  });

  it('fillAddresses gives SVM addresses only to hosts with an SVM', () => {
    const p = plan([
      { name: 'a', roles: ['mdm'] },
      { name: 'b', roles: [] },
      { name: 'c', roles: ['sds'] },
    ]);
    fillAddresses(p, 'svm_ip', ['10.20.0.11', '10.20.0.12']);
    expect(p.hosts.map((h) => h.svm_ip)).toEqual(['10.20.0.11', undefined, '10.20.0.12']);
    fillAddresses(p, 'vmkernel_ip', ['10.30.0.1', '10.30.0.2', '10.30.0.3']);
    expect(p.hosts.map((h) => h.vmkernel_ip)).toEqual(['10.30.0.1', '10.30.0.2', '10.30.0.3']);
  });

  it('planJSON round-trips', () => {
    const p = plan([{ name: 'a', roles: ['mdm'] }]);
    expect(JSON.parse(planJSON(p))).toEqual(p);
  });
});
