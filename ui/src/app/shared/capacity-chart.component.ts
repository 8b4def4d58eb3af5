import { Component, computed, input } from '@angular/core';
import { bytes } from '../core/format';

// CapacityChartComponent draws raw capacity as one stacked bar: used,
// free (usable) and what mirroring and spare hold back (raw - usable).
@Component({
  selector: 'cairn-capacity-chart',
  template: `
    <figure class="cap" [attr.aria-label]="summary()">
      <svg viewBox="0 0 300 24" width="100%" height="28" role="img" [attr.aria-label]="summary()">
        @for (s of segments(); track s.label) {
          <rect [attr.x]="s.x" y="0" [attr.width]="s.w" height="24" [attr.fill]="s.color"><title>{{ s.label }}: {{ s.text }}</title></rect>
        }
      </svg>
      <figcaption>
        <ul class="legend">
          @for (s of segments(); track s.label) {
            <li><span class="swatch" [style.background]="s.color"></span>{{ s.label }} <strong>{{ s.text }}</strong></li>
          }
        </ul>
      </figcaption>
      @if (!reported()) {
        <p class="cairn-muted">The gateway reports raw capacity only ({{ rawText() }}); used and free appear when it reports them.</p>
      }
    </figure>
  `,
  styles: `
    .cap { margin: 0; }
    .legend { list-style: none; padding: 0; margin: 0.3rem 0 0; display: flex; flex-wrap: wrap; gap: 0.8rem; font-size: 0.65rem; }
    .swatch { display: inline-block; width: 0.6rem; height: 0.6rem; margin-right: 0.25rem; vertical-align: middle; }
  `,
})
export class CapacityChartComponent {
  readonly raw = input.required<number>();
  readonly usable = input.required<number>();
  readonly used = input.required<number>();

  // reported: the gateway gave usable capacity (an older or partial
  // gateway gives raw only: then the chart shows raw, not a fake split).
  readonly reported = computed(() => this.usable() > 0);
  readonly rawText = computed(() => bytes(this.raw()));

  readonly segments = computed(() => {
    const raw = Math.max(this.raw(), 1);
    if (!this.reported()) {
      return [{ label: 'Raw', v: this.raw(), color: '#b3b3b3', x: 0, w: 300, text: bytes(this.raw()) }];
    }
    const used = Math.min(this.used(), this.usable());
    const free = Math.max(this.usable() - used, 0);
    const reserved = Math.max(this.raw() - this.usable(), 0);
    const parts = [
      { label: 'Used', v: used, color: '#0072a3' },
      { label: 'Free', v: free, color: '#8fd14f' },
      { label: 'Copies and spare', v: reserved, color: '#b3b3b3' },
    ];
    let x = 0;
    return parts.map((p) => {
      const w = (p.v / raw) * 300;
      const s = { ...p, x, w, text: bytes(p.v) };
      x += w;
      return s;
    });
  });

  readonly summary = computed(() =>
    this.reported()
      ? `Capacity: ${bytes(this.used())} used of ${bytes(this.usable())} usable (${bytes(this.raw())} raw)`
      : `Capacity: ${bytes(this.raw())} raw; used and free not reported`,
  );
}
