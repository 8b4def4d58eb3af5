import { TestBed } from '@angular/core/testing';
import { provideNoopAnimations } from '@angular/platform-browser/animations';
import { ApiService } from '../core/api.service';
import { SystemView, Volume } from '../core/types';
import { VolumesComponent, qosRequest } from './volumes.component';

const vol0: Volume = { id: 'v1', name: 'vol0', pool_id: 'p', size: 8 * 2 ** 30, thin: true, wwn: '6000c2', mappings: [{ host_id: 'h1' }] };
const system: SystemView = {
  name: 'cairn1',
  datacenter: 'DC0',
  pool: 'pool1',
  hosts: ['esx-01', 'esx-02'],
  deploy: { completed: true, steps_done: 40 },
  volumes: [vol0],
};

describe('VolumesComponent', () => {
  async function setup(patchAnswer = { status: 200, body: '{}' }) {
    TestBed.configureTestingModule({ imports: [VolumesComponent], providers: [provideNoopAnimations()] });
    const api = TestBed.inject(ApiService);
    const posts: { url: string; body: unknown }[] = [];
    const patches: { url: string; body: unknown }[] = [];
    api.base = '/api/v1';
    api.fetchFn = async (url, init) => {
      if (init?.method === 'PATCH') {
        patches.push({ url, body: JSON.parse(String(init.body)) });
        return new Response(patchAnswer.body, { status: patchAnswer.status });
      }
      if (init?.method === 'POST') {
        posts.push({ url, body: JSON.parse(String(init.body)) });
        return new Response('{"name":"volume:vol1","state":"running","started":"2026-01-01T00:00:00Z"}', { status: 202 });
      }
      if (url.endsWith('/systems')) {
        return new Response(JSON.stringify([system]));
      }
      if (url.includes('/events')) {
        return new Response('', { status: 200 });
      }
      return new Response('[]');
    };
    const f = TestBed.createComponent(VolumesComponent);
    f.detectChanges();
    await f.componentInstance.store.refresh();
    // No whenStable: the store's refresh timer keeps the zone busy until
    // the component is destroyed.
    f.detectChanges();
    return { f, posts, patches };
  }

  it("lists the system's volumes from the server", async () => {
    const { f } = await setup();
    const text = (f.nativeElement as HTMLElement).textContent ?? '';
    expect(text).toContain('System cairn1');
    expect(text).toContain('vol0');
    expect(text).toContain('8.0 GB');
    f.destroy();
  });

  it('refuses a bad name or no host without calling the server, and says what to do', async () => {
    const { f, posts } = await setup();
    const c = f.componentInstance;
    c.openCreate(system);
    c.name = 'bad name!';
    await c.create();
    expect(c.formError()).toContain('Give the volume a name');
    c.name = 'vol1';
    c.hosts.clear();
    await c.create();
    expect(c.formError()).toContain('at least one host');
    expect(posts).toEqual([]);
    f.destroy();
  });

  it('creates the volume and its datastore on the chosen hosts', async () => {
    const { f, posts } = await setup();
    const c = f.componentInstance;
    c.openCreate(system);
    c.name = 'vol1';
    c.sizeGiB = 16;
    c.toggle('esx-02', false);
    await c.create();
    expect(posts).toEqual([
      { url: '/api/v1/volumes', body: { system: 'cairn1', volume: 'vol1', size_gib: 16, thin: true, hosts: ['esx-01'] } },
    ]);
    expect(c.jobName()).toBe('volume:vol1');
    expect(c.creating).toBe(false);
    f.destroy();
  });

  it('shows QoS limits in the admin\'s units, and a pool rule as such', async () => {
    const { f } = await setup();
    const c = f.componentInstance;
    const v = vol0;
    expect(c.limits(v)).toBe('unlimited');
    expect(c.limits({ ...v, iops_limit: 2000, bandwidth_limit: 100 * 2 ** 20, effective_iops_limit: 2000, effective_bandwidth_limit: 100 * 2 ** 20 })).toBe(
      '2,000 IOPS · 100 MiB/s',
    );
    expect(c.limits({ ...v, effective_iops_limit: 800 })).toBe('800 IOPS (pool rule)');
    f.destroy();
  });

  it('checks the QoS form in its own units before asking the server', () => {
    expect(qosRequest(2000, 100)).toEqual({ iops_limit: 2000, bandwidth_limit: 100 * 2 ** 20 });
    expect(qosRequest(null, null)).toEqual({ iops_limit: 0, bandwidth_limit: 0 });
    expect(qosRequest(1.5, null)).toContain('whole number');
    expect(qosRequest(-1, null)).toContain('whole number');
    expect(qosRequest(null, 0.01)).toContain('at least 0.0625 MiB/s');
    expect(qosRequest(null, -2)).toContain('MiB per second');
  });

  it('sends the limits and closes; a refusal keeps the dialog open with the server\'s reason', async () => {
    const ok = await setup();
    const c = ok.f.componentInstance;
    c.openQoS(system, vol0);
    c.iopsLimit = 2000;
    c.bandwidthMiB = 20;
    await c.saveQoS();
    expect(ok.patches).toEqual([{ url: '/api/v1/systems/cairn1/volumes/vol0', body: { iops_limit: 2000, bandwidth_limit: 20 * 2 ** 20 } }]);
    expect(c.editingQoS).toBe(false);
    ok.f.destroy();
    TestBed.resetTestingModule();

    const refused = await setup({ status: 400, body: '{"error":"volume \\"vol0\\": iops_limit 20000000 must be 0 (unlimited) or 1 to 10000000 I/Os per second"}' });
    const r = refused.f.componentInstance;
    r.openQoS(system, vol0);
    r.iopsLimit = 20_000_000;
    await r.saveQoS();
    expect(r.editingQoS).toBe(true);
    expect(r.qosError()).toContain('1 to 10000000 I/Os per second');
    refused.f.destroy();
  });

  it('grows a volume as a job, and refuses a shrink without calling the server', async () => {
    const { f, posts } = await setup();
    const c = f.componentInstance;
    c.openGrow(system, vol0);
    expect(c.growGiB).toBe(16);
    c.growGiB = 8;
    await c.grow();
    expect(c.growError()).toContain('larger than the volume\'s 8 GiB');
    expect(posts).toEqual([]);
    c.growGiB = 24;
    await c.grow();
    expect(posts).toEqual([{ url: '/api/v1/systems/cairn1/volumes/vol0/grow', body: { size_gib: 24 } }]);
    expect(c.growing).toBe(false);
    expect(c.jobName()).toBe('volume:vol1');
    f.destroy();
  });

  it('maps to the hosts not mapped yet, with the access chosen, and follows the job in the dialog', async () => {
    const { f, posts } = await setup();
    const c = f.componentInstance;
    const v: Volume = { ...vol0, mappings: [{ host_id: 'h1', host_name: 'esx-01' }] };
    expect(c.mappedTo(v)).toBe('esx-01');
    c.openHosts(system, v, 'map');
    expect(c.hostChoosable('esx-01')).toBe(false);
    expect(c.hostChoosable('esx-02')).toBe(true);
    await c.applyHosts();
    expect(c.hostsError()).toContain('at least one host');
    expect(posts).toEqual([]);
    c.chooseHost('esx-02', true);
    c.access = 'read_only';
    await c.applyHosts();
    expect(posts).toEqual([{ url: '/api/v1/systems/cairn1/volumes/vol0/map', body: { hosts: ['esx-02'], access: 'read_only' } }]);
    expect(c.hostsJobName()).toBe('volume:vol1');
    expect(c.editingHosts).toBe(true);
    f.destroy();
  });

  it('unmaps from mapped hosts only; the server\'s refusal stays in the dialog', async () => {
    const { f, posts } = await setup();
    const c = f.componentInstance;
    const v: Volume = { ...vol0, mappings: [{ host_id: 'h1', host_name: 'esx-01' }] };
    c.openHosts(system, v, 'unmap');
    expect(c.hostChoosable('esx-01')).toBe(true);
    expect(c.hostChoosable('esx-02')).toBe(false);
    expect(c.hostNote('esx-02')).toBe(' (not mapped)');
    c.chooseHost('esx-01', true);
    await c.applyHosts();
    expect(posts).toEqual([{ url: '/api/v1/systems/cairn1/volumes/vol0/unmap', body: { hosts: ['esx-01'] } }]);
    f.destroy();
    TestBed.resetTestingModule();

    const refused = await setup();
    const r = refused.f.componentInstance;
    const api = TestBed.inject(ApiService);
    api.fetchFn = async () => new Response('{"error":"job delete:vol0 is running on volume vol0: wait for it to end"}', { status: 409 });
    r.openHosts(system, v, 'unmap');
    r.chooseHost('esx-01', true);
    await r.applyHosts();
    expect(r.hostsError()).toContain('wait for it to end');
    expect(r.hostsJobName()).toBeNull();
    refused.f.destroy();
  });

  it('deletes only once the volume name is typed, and says what will happen', async () => {
    const { f, posts } = await setup();
    const c = f.componentInstance;
    c.openDelete(system, vol0);
    f.detectChanges();
    const body = document.body.textContent ?? '';
    expect(body).toContain('unmount the datastore on 2 hosts');
    expect(body).toContain('destroys the volume');
    const button = Array.from(document.querySelectorAll('button')).find((b) => b.textContent?.includes('Delete volume and data')) as HTMLButtonElement;
    expect(button.disabled).toBe(true);
    c.deleteTyped = 'vol';
    await c.deleteVolume();
    expect(c.deleteError()).toContain('Type the volume\'s name, vol0');
    expect(posts).toEqual([]);
    c.deleteTyped = 'vol0';
    f.detectChanges();
    await c.deleteVolume();
    expect(posts).toEqual([{ url: '/api/v1/systems/cairn1/volumes/vol0/delete', body: { confirm: 'vol0' } }]);
    expect(c.deleteJobName()).toBe('volume:vol1');
    f.destroy();
  });
});
