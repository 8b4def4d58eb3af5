import { TestBed } from '@angular/core/testing';
import { ApiService } from '../core/api.service';
import { RebuildProgress, StatPoint, SystemView } from '../core/types';
import { PerformanceComponent } from './performance.component';
import { RebuildComponent } from './rebuild.component';

const system: SystemView = {
  name: 'cairn1',
  datacenter: 'DC0',
  pool: 'pool1',
  hosts: ['esx-01'],
  deploy: { completed: true, steps_done: 40 },
  sdss: [{ id: 's1', name: 'svm-b', pd_id: 'pd', address: 'x', state: 'normal', up: true }, { id: 's2', name: 'svm-a', pd_id: 'pd', address: 'y', state: 'normal', up: true }],
  volumes: [{ id: 'v1', name: 'vol1', pool_id: 'p', size: 1, thin: true, wwn: 'w' }],
};

const rate = (iops: number, lat: number) => ({ iops, bytes_per_second: iops * 16384, latency_mean_us: lat, latency_p99_us: lat * 4.6 });
function answer(iops: number[], extra: Record<string, unknown> = {}) {
  const t0 = Date.parse('2026-11-26T12:00:00Z');
  const history: StatPoint[] = iops.map((n, i) => ({
    timestamp: new Date(t0 + i * 5000).toISOString(),
    read: rate(n, 310),
    write: rate(n / 2, 1830),
    throttled_seconds: 0,
  }));
  const last = history[history.length - 1];
  return { system: 'cairn1', kind: 'system', timestamp: last?.timestamp ?? null, interval_seconds: 5, read: last?.read, write: last?.write, throttled_seconds: 0, history, ...extra };
}

async function settle(f: { detectChanges(): void }) {
  for (let i = 0; i < 5; i++) {
    await new Promise((r) => setTimeout(r, 0));
    f.detectChanges();
  }
}

describe('PerformanceComponent', () => {
  function setup(reply: (url: string) => Response) {
    TestBed.configureTestingModule({ imports: [PerformanceComponent] });
    const api = TestBed.inject(ApiService);
    const urls: string[] = [];
    api.base = '/api/v1';
    api.fetchFn = async (url) => {
      urls.push(url);
      return reply(url);
    };
    const f = TestBed.createComponent(PerformanceComponent);
    f.componentRef.setInput('system', system);
    return { f, urls };
  }

  it('charts the system and gives the current figures as text', async () => {
    const { f, urls } = setup(() => new Response(JSON.stringify(answer([1000, 1500, 1234]))));
    f.detectChanges();
    await settle(f);
    const el = f.nativeElement as HTMLElement;
    expect(urls[0]).toBe('/api/v1/systems/cairn1/statistics?kind=system');
    const imgs = Array.from(el.querySelectorAll('svg[role="img"]')).map((s) => s.getAttribute('aria-label'));
    expect(imgs).toHaveLength(3);
    expect(imgs[0]).toBe('IOPS, last 5 minutes: now Read 1,234 IOPS, Write 617 IOPS; scale 0 to 2,000 IOPS');
    expect(imgs[1]).toContain('scale 0 to 50.0 MB/s'); // 19.3 MB/s read: rounded in MiB
    expect(imgs[2]).toContain('Read 310 µs, Write 1.8 ms');
    expect(el.querySelectorAll('polyline')[0].getAttribute('points')?.split(' ')).toHaveLength(3);
    const rows = Array.from(el.querySelectorAll('table.perf-now tbody tr')).map((r) => Array.from(r.children, (c) => c.textContent?.trim()).join(' '));
    expect(rows[0]).toBe('Read 1,234 IOPS 19.3 MB/s 310 µs 1.4 ms');
    expect(el.querySelector('table caption')?.textContent).toContain('System cairn1');
    f.destroy();
  });

  it('asks for the chosen SDS by name and shows the gateway refusal with its words', async () => {
    const { f, urls } = setup((url) =>
      url.includes('kind=sds') ? new Response('{"error":"sds \\"svm-a\\" not found"}', { status: 404 }) : new Response(JSON.stringify(answer([5]))),
    );
    f.detectChanges();
    await settle(f);
    f.componentInstance.setKind('sds');
    await settle(f);
    expect(urls.at(-1)).toBe('/api/v1/systems/cairn1/statistics?kind=sds&name=svm-a');
    const el = f.nativeElement as HTMLElement;
    expect(el.querySelector('#perf-name-cairn1')).not.toBeNull();
    expect(el.textContent).toContain('Statistics of SDS svm-a are not available: sds "svm-a" not found');
    expect(el.querySelectorAll('svg[role="img"]')).toHaveLength(0);
    f.destroy();
  });

  it('leaves idle intervals out of the latency line instead of drawing 0', async () => {
    const { f } = setup(() => new Response(JSON.stringify(answer([800, 0, 900]))));
    f.detectChanges();
    await settle(f);
    const lines = (f.nativeElement as HTMLElement).querySelectorAll('polyline');
    expect(lines[0].getAttribute('points')?.split(' ')).toHaveLength(3); // IOPS: 0 is a value
    expect(lines[4].getAttribute('points')?.split(' ')).toHaveLength(2); // latency: no I/O, no point
    f.destroy();
  });

  it('waits for the first sample without drawing empty charts', async () => {
    const { f } = setup(() => new Response(JSON.stringify(answer([]))));
    f.detectChanges();
    await settle(f);
    expect((f.nativeElement as HTMLElement).textContent).toContain("Waiting for the gateway's first sample");
    f.destroy();
  });
});

describe('RebuildComponent', () => {
  function setup(body: Partial<RebuildProgress> | undefined) {
    TestBed.configureTestingModule({ imports: [RebuildComponent] });
    const base: RebuildProgress = { system: 'cairn1', degraded_groups: 0, rebuilding_groups: 0, resyncing_groups: 0, rebalancing_groups: 0, pending_bytes: 0, done_bytes: 0, resync_bytes: 0, rate_bytes_per_second: 0, percent: 100, eta_seconds: 0, observed_rate_bytes_per_second: null, window_seconds: 0, eta_state: 'idle', observed_eta_seconds: null, observed: '' };
    const f = TestBed.createComponent(RebuildComponent);
    f.componentRef.setInput('system', 'cairn1');
    f.componentRef.setInput('progress', body && { ...base, ...body });
    return f;
  }

  it('says when the server sent no progress', async () => {
    const f = setup(undefined);
    f.detectChanges();
    await settle(f);
    expect((f.nativeElement as HTMLElement).textContent).toContain('Rebuild progress is not available');
    f.destroy();
  });

  it('shows degraded groups before the SDSs report what to copy', async () => {
    const f = setup({ degraded_groups: 162, percent: 0 });
    f.detectChanges();
    await settle(f);
    const t = (f.nativeElement as HTMLElement).textContent ?? '';
    expect(t).toContain('Rebuilding');
    expect(t).toContain('Starting: the SDSs have not reported');
    expect(t).toContain('162 placement groups degraded');
    f.destroy();
  });

  it('says when nothing is copied', async () => {
    const f = setup({});
    f.detectChanges();
    await settle(f);
    expect((f.nativeElement as HTMLElement).textContent).toContain('No rebuild, rebalance or resync in progress.');
    f.destroy();
  });

  it('says estimating until the server observed a rate', async () => {
    const f = setup({ pending_bytes: 3 * 2 ** 30, resyncing_groups: 2, percent: 12.5, eta_state: 'estimating' });
    f.detectChanges();
    await settle(f);
    const t = (f.nativeElement as HTMLElement).textContent ?? '';
    expect(t).toContain('Resyncing 2.');
    expect(t).toContain('12.5 % — 3.0 GB left');
    expect((f.nativeElement as HTMLElement).querySelector('.eta')?.textContent).toBe('estimating…');
    f.destroy();
  });

  it('gives the ETA from the observed rate', async () => {
    const f = setup({ pending_bytes: 3 * 2 ** 30, rebuilding_groups: 40, percent: 60, eta_state: 'known', observed_rate_bytes_per_second: 100 << 20, window_seconds: 60, observed_eta_seconds: 31 });
    f.detectChanges();
    await settle(f);
    const el = f.nativeElement as HTMLElement;
    expect(el.textContent).toContain('Rebuilding 40 placement groups.');
    expect(el.textContent).toContain('100.0 MB/s over the last 60 s');
    expect(el.querySelector('.eta')?.textContent).toBe('under a minute');
    expect(el.querySelector('progress')?.getAttribute('aria-label')).toBe('Copy progress of system cairn1');
    f.destroy();
  });
});
