import { TestBed } from '@angular/core/testing';
import { provideNoopAnimations } from '@angular/platform-browser/animations';
import { ApiService } from '../core/api.service';
import { SystemView } from '../core/types';
import { VolumesComponent } from './volumes.component';

const system: SystemView = {
  name: 'cairn1',
  datacenter: 'DC0',
  pool: 'pool1',
  hosts: ['esx-01', 'esx-02'],
  deploy: { completed: true, steps_done: 40 },
  volumes: [{ id: 'v1', name: 'vol0', pool_id: 'p', size: 8 * 2 ** 30, thin: true, wwn: '6000c2', mappings: [{ host_id: 'h1' }] }],
};

describe('VolumesComponent', () => {
  async function setup() {
    TestBed.configureTestingModule({ imports: [VolumesComponent], providers: [provideNoopAnimations()] });
    const api = TestBed.inject(ApiService);
    const posts: { url: string; body: unknown }[] = [];
    api.base = '/api/v1';
    api.fetchFn = async (url, init) => {
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
    return { f, posts };
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
});
