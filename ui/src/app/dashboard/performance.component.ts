import { Component, Input, OnDestroy, OnInit, computed, inject, signal } from '@angular/core';
import { DatePipe } from '@angular/common';
import { FormsModule } from '@angular/forms';
import { ApiError, ApiService } from '../core/api.service';
import { bandwidth, iops, latency, mergeHistory } from '../core/perf';
import { StatKind, StatPoint, Statistics, SystemView } from '../core/types';
import { ChartSeries, LineChartComponent } from '../shared/line-chart.component';
import { MessageComponent } from '../shared/message.component';

export const PERF_WINDOW_MS = 5 * 60_000;
export const PERF_POLL_MS = 3000;

const READ = { name: 'Read', color: '#0072a3', dash: '' };
const WRITE = { name: 'Write', color: '#c25400', dash: '5 3' };

// PerformanceComponent: live IOPS, bandwidth and latency of a system or
// one of its pools, volumes or SDSs, from the gateway's statistics
// (polled every 3 s; the last 5 minutes are kept), with the current
// figures as a table.
@Component({
  selector: 'cairn-performance',
  // Clarity's CSS classes, not its Angular components: the dashboard's
  // charts stay light and their tests need no Clarity linking.
  imports: [FormsModule, DatePipe, LineChartComponent, MessageComponent],
  template: `
    <div class="controls">
      <div class="clr-form-control">
        <label class="clr-control-label" [for]="'perf-kind-' + systemValue().name">Show</label>
        <div class="clr-select-wrapper">
          <select class="clr-select" [id]="'perf-kind-' + systemValue().name" [name]="'perf-kind-' + systemValue().name" [ngModel]="kind()" (ngModelChange)="setKind($event)">
            <option value="system">Whole system</option>
            <option value="pool">Storage pool</option>
            <option value="volume">Volume</option>
            <option value="sds">SDS</option>
          </select>
        </div>
      </div>
      @if (kind() !== 'system') {
        <div class="clr-form-control">
          <label class="clr-control-label" [for]="'perf-name-' + systemValue().name">{{ kindLabel() }}</label>
          <div class="clr-select-wrapper">
            <select class="clr-select" [id]="'perf-name-' + systemValue().name" [name]="'perf-name-' + systemValue().name" [ngModel]="name()" (ngModelChange)="setName($event)">
              @for (n of names(); track n) {
                <option [value]="n">{{ n }}</option>
              }
            </select>
          </div>
        </div>
      }
    </div>
    @if (error(); as err) {
      <div class="alert alert-warning" role="alert"><div class="alert-items"><div class="alert-item static"><span class="alert-text"><cairn-message [text]="err" /></span></div></div></div>
    }
    @if (kind() !== 'system' && names().length === 0) {
      <p class="cairn-muted">The system has no {{ kindLabel().toLowerCase() }} yet.</p>
    } @else if (latest()) {
      @let st = latest()!;
      @if (points().length === 0) {
        <p class="cairn-muted">Waiting for the gateway's first sample (it samples every {{ st.interval_seconds }} s).</p>
      } @else {
        <div class="charts" role="group" [attr.aria-label]="'Performance of ' + subject()">
          <cairn-line-chart label="IOPS" [series]="iopsSeries()" [times]="times()" [now]="now()" [windowMs]="windowMs" [format]="fmtIops" />
          <cairn-line-chart label="Bandwidth" [series]="bandwidthSeries()" [times]="times()" [now]="now()" [windowMs]="windowMs" [format]="fmtBandwidth" [unit]="mib" />
          <cairn-line-chart label="Latency (mean)" [series]="latencySeries()" [times]="times()" [now]="now()" [windowMs]="windowMs" [format]="fmtLatency" />
        </div>
        <table class="table table-compact perf-now">
          <caption>{{ subject() }} in the {{ st.interval_seconds }} s to {{ st.timestamp | date: 'HH:mm:ss' }}</caption>
          <thead><tr><th scope="col"></th><th scope="col">IOPS</th><th scope="col">Bandwidth</th><th scope="col">Mean latency</th><th scope="col">p99 latency</th></tr></thead>
          <tbody>
            <tr><th scope="row">Read</th><td>{{ fmtIops(st.read.iops) }}</td><td>{{ fmtBandwidth(st.read.bytes_per_second) }}</td><td>{{ fmtLatency(st.read.latency_mean_us) }}</td><td>{{ fmtLatency(st.read.latency_p99_us) }}</td></tr>
            <tr><th scope="row">Write</th><td>{{ fmtIops(st.write.iops) }}</td><td>{{ fmtBandwidth(st.write.bytes_per_second) }}</td><td>{{ fmtLatency(st.write.latency_mean_us) }}</td><td>{{ fmtLatency(st.write.latency_p99_us) }}</td></tr>
          </tbody>
        </table>
        @if (st.throttled_seconds > 0) {
          <p class="cairn-muted">QoS held requests back for {{ st.throttled_seconds.toFixed(1) }} s of the last {{ st.interval_seconds }} s (the limits on the Volumes page).</p>
        }
      }
    } @else if (!error()) {
      <span class="spinner spinner-inline">Loading statistics</span> <span class="cairn-muted">Loading statistics…</span>
    }
  `,
  styles: `
    .controls { display: flex; gap: 1.2rem; flex-wrap: wrap; align-items: baseline; }
    .controls .clr-form-control { margin-top: 0; flex-direction: row; gap: 0.5rem; align-items: baseline; }
    .charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(14rem, 1fr)); gap: 1rem; margin-top: 0.6rem; }
    .perf-now { margin-top: 0.6rem; }
    .perf-now caption { text-align: left; font-size: 0.65rem; }
  `,
})
export class PerformanceComponent implements OnInit, OnDestroy {
  private api = inject(ApiService);
  readonly systemValue = signal<SystemView>({ name: '', datacenter: '', pool: '', hosts: null, deploy: { completed: false, steps_done: 0 } });
  @Input({ required: true }) set system(v: SystemView) {
    this.systemValue.set(v);
  }
  readonly windowMs = PERF_WINDOW_MS;
  readonly mib = 2 ** 20;

  readonly kind = signal<StatKind>('system');
  readonly name = signal('');
  readonly points = signal<StatPoint[]>([]);
  readonly latest = signal<Statistics | null>(null);
  readonly error = signal<string | null>(null);
  readonly now = signal(Date.now());
  private timer: ReturnType<typeof setInterval> | null = null;
  private generation = 0; // answers for an earlier selection are dropped

  readonly fmtIops = (n: number) => iops(n);
  readonly fmtBandwidth = (n: number) => bandwidth(n);
  readonly fmtLatency = (n: number) => latency(n);

  readonly kindLabel = computed(() => ({ system: 'System', pool: 'Pool', volume: 'Volume', sds: 'SDS' })[this.kind()]);
  readonly names = computed(() => {
    const s = this.systemValue();
    switch (this.kind()) {
      case 'pool':
        return s.pool ? [s.pool] : [];
      case 'volume':
        return (s.volumes ?? []).map((v) => v.name).sort();
      case 'sds':
        return (s.sdss ?? []).map((d) => d.name).sort();
      default:
        return [];
    }
  });
  readonly subject = computed(() => (this.kind() === 'system' ? `System ${this.systemValue().name}` : `${this.kindLabel()} ${this.name()}`));
  readonly times = computed(() => this.points().map((p) => Date.parse(p.timestamp)));
  readonly iopsSeries = computed<ChartSeries[]>(() => [
    { ...READ, values: this.points().map((p) => p.read.iops) },
    { ...WRITE, values: this.points().map((p) => p.write.iops) },
  ]);
  readonly bandwidthSeries = computed<ChartSeries[]>(() => [
    { ...READ, values: this.points().map((p) => p.read.bytes_per_second) },
    { ...WRITE, values: this.points().map((p) => p.write.bytes_per_second) },
  ]);
  readonly latencySeries = computed<ChartSeries[]>(() => [
    // No I/O, no latency: a gap rather than a drop to 0.
    { ...READ, values: this.points().map((p) => (p.read.iops > 0 ? p.read.latency_mean_us : NaN)) },
    { ...WRITE, values: this.points().map((p) => (p.write.iops > 0 ? p.write.latency_mean_us : NaN)) },
  ]);

  ngOnInit(): void {
    void this.poll();
    this.timer = setInterval(() => void this.poll(), PERF_POLL_MS);
  }

  ngOnDestroy(): void {
    if (this.timer) {
      clearInterval(this.timer);
    }
    this.timer = null;
  }

  setKind(k: StatKind): void {
    this.kind.set(k);
    this.name.set(this.names()[0] ?? '');
    this.restart();
  }

  setName(n: string): void {
    this.name.set(n);
    this.restart();
  }

  private restart(): void {
    this.generation++;
    this.points.set([]);
    this.latest.set(null);
    this.error.set(null);
    void this.poll();
  }

  async poll(): Promise<void> {
    if (this.kind() !== 'system' && !this.name()) {
      return;
    }
    const gen = this.generation;
    try {
      const st = await this.api.statistics(this.systemValue().name, this.kind(), this.name());
      if (gen !== this.generation) {
        return;
      }
      // The window ends at the gateway's last sample (its clock, not the
      // browser's, which may differ).
      const now = st.timestamp ? Date.parse(st.timestamp) : Date.now();
      this.now.set(now);
      this.latest.set(st);
      this.points.set(mergeHistory(this.points(), st.history ?? [], PERF_WINDOW_MS, now));
      this.error.set(null);
    } catch (e) {
      if (gen === this.generation) {
        this.error.set(`Statistics of ${this.subject()} are not available: ${e instanceof ApiError ? e.message : String(e)}`);
      }
    }
  }
}
