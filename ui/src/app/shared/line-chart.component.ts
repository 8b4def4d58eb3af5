import { Component, Input, computed, signal } from '@angular/core';
import { niceMax } from '../core/perf';

// A series of a LineChartComponent: its values at the chart's times.
export interface ChartSeries {
  name: string;
  color: string;
  dash: string; // stroke-dasharray: series differ by more than colour
  values: number[];
}

const W = 300;
const H = 100;

// LineChartComponent draws a few series over a time window as SVG lines,
// newest at the right. Its text alternative (the SVG's label and the
// legend) says the current value of each series and the chart's scale.
@Component({
  selector: 'cairn-line-chart',
  template: `
    <figure class="chart">
      <figcaption class="chart-title">{{ labelValue() }}</figcaption>
      <div class="plot">
        <span class="ymax" aria-hidden="true">{{ formatValue()(top()) }}</span>
        <svg [attr.viewBox]="'0 0 ' + W + ' ' + H" preserveAspectRatio="none" width="100%" height="110" role="img" [attr.aria-label]="summary()">
          <line x1="0" [attr.y1]="H / 2" [attr.x2]="W" [attr.y2]="H / 2" class="grid" />
          <line x1="0" [attr.y1]="H - 0.5" [attr.x2]="W" [attr.y2]="H - 0.5" class="axis" />
          @for (s of lines(); track s.name) {
            <polyline [attr.points]="s.points" fill="none" [attr.stroke]="s.color" [attr.stroke-dasharray]="s.dash" stroke-width="2" vector-effect="non-scaling-stroke" />
          }
        </svg>
        <div class="xaxis" aria-hidden="true"><span>−{{ windowMinutes() }} min</span><span>now</span></div>
      </div>
      <ul class="legend">
        @for (s of seriesValue(); track s.name) {
          <li>
            <svg width="18" height="8" aria-hidden="true"><line x1="0" y1="4" x2="18" y2="4" [attr.stroke]="s.color" [attr.stroke-dasharray]="s.dash" stroke-width="2" /></svg>
            {{ s.name }} <strong class="current">{{ current(s) }}</strong>
          </li>
        }
      </ul>
    </figure>
  `,
  styles: `
    .chart { margin: 0; }
    .chart-title { font-weight: 600; font-size: 0.7rem; }
    .plot { position: relative; border-left: 1px solid var(--cds-alias-object-border-color, #b3b3b3); padding-top: 0.9rem; }
    .ymax { position: absolute; top: 0; left: 0.2rem; font-size: 0.55rem; }
    .grid { stroke: var(--cds-alias-object-border-color, #dcdcdc); stroke-dasharray: 2 3; vector-effect: non-scaling-stroke; }
    .axis { stroke: var(--cds-alias-object-border-color, #b3b3b3); vector-effect: non-scaling-stroke; }
    .xaxis { display: flex; justify-content: space-between; font-size: 0.55rem; }
    .legend { list-style: none; padding: 0; margin: 0.2rem 0 0; display: flex; flex-wrap: wrap; gap: 0.8rem; font-size: 0.65rem; }
  `,
})
export class LineChartComponent {
  readonly W = W;
  readonly H = H;
  readonly labelValue = signal<string>('');
  @Input({ required: true }) set label(v: string) {
    this.labelValue.set(v);
  }
  readonly seriesValue = signal<ChartSeries[]>([]);
  @Input({ required: true }) set series(v: ChartSeries[]) {
    this.seriesValue.set(v);
  }
  readonly timesValue = signal<number[]>([]);
  @Input({ required: true }) set times(v: number[]) {
    this.timesValue.set(v);
  }
  readonly nowValue = signal<number>(0);
  @Input({ required: true }) set now(v: number) {
    this.nowValue.set(v);
  }
  readonly windowMsValue = signal<number>(5 * 60_000);
  @Input() set windowMs(v: number) {
    this.windowMsValue.set(v);
  }
  readonly formatValue = signal<(n: number) => string>((n: number) => String(n));
  @Input({ required: true }) set format(v: (n: number) => string) {
    this.formatValue.set(v);
  }

  // unit: the scale is rounded in this unit (1 MiB for bytes/s, so the
  // top reads "20.0 MB/s", not "19.1 MB/s").
  readonly unitValue = signal<number>(1);
  @Input() set unit(v: number) {
    this.unitValue.set(v);
  }

  readonly windowMinutes = computed(() => Math.round(this.windowMsValue() / 60_000));
  readonly top = computed(() => {
    const u = this.unitValue();
    return niceMax(Math.max(0, ...this.seriesValue().flatMap((s) => s.values.filter(Number.isFinite))) / u) * u;
  });

  readonly lines = computed(() => {
    const start = this.nowValue() - this.windowMsValue();
    const times = this.timesValue();
    const top = this.top();
    return this.seriesValue().map((s) => ({
      ...s,
      // A value that is not a number (latency of an idle interval) is a gap.
      points: s.values
        .map((v, i) => {
          if (!Number.isFinite(v)) {
            return '';
          }
          const x = ((times[i] - start) / this.windowMsValue()) * W;
          const y = H - (Math.max(0, v) / top) * H;
          return `${x.toFixed(1)},${y.toFixed(1)}`;
        })
        .filter((p) => p)
        .join(' '),
    }));
  });

  current(s: ChartSeries): string {
    const v = s.values[s.values.length - 1];
    return Number.isFinite(v) ? this.formatValue()(v) : '—';
  }

  readonly summary = computed(() => {
    const parts = this.seriesValue().map((s) => `${s.name} ${this.current(s)}`);
    return `${this.labelValue()}, last ${this.windowMinutes()} minutes: now ${parts.join(', ')}; scale 0 to ${this.formatValue()(this.top())}`;
  });
}
