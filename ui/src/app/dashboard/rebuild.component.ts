import { Component, Input, computed, signal } from '@angular/core';
import { bytes } from '../core/format';
import { bandwidth, eta } from '../core/perf';
import { RebuildProgress } from '../core/types';

// RebuildComponent: the copy work of a system (rebuild after a failure,
// rebalance after a change, resync after maintenance) with its percent
// and an ETA from the copy rate the plugin server observed over the last
// minute ("estimating" until it has one). Its progress is the system's
// (SystemView.rebuild), refreshed with the health beside it from the same
// gateway answer: the two never disagree on the screen.
@Component({
  selector: 'cairn-rebuild',
  template: `
    @if (progressValue(); as p) {
      @if (active()) {
        <p class="rebuild-state"><span class="label label-warning">{{ label() }}</span> {{ work() }}</p>
        @if (p.pending_bytes > 0) {
          <div class="copy-bar">
            <progress max="100" [value]="p.percent" [attr.aria-label]="'Copy progress of system ' + systemValue()"></progress>
            <span aria-hidden="true">{{ p.percent.toFixed(0) }}%</span>
          </div>
          <dl class="rebuild-facts rebuild-figures">
            <dt>Copied</dt><dd>{{ percent() }} — {{ bytesText(p.pending_bytes) }} left</dd>
            <dt>Rate</dt><dd>{{ rateText() }}</dd>
            <dt>Time left</dt><dd class="eta">{{ etaText() }}</dd>
          </dl>
        } @else {
          <p class="rebuild-starting">Starting: the SDSs have not reported how much data to copy yet.</p>
        }
        @if (p.degraded_groups > 0) {
          <p class="cairn-muted">{{ p.degraded_groups }} placement groups degraded: their data is served but not protected against another failure until the rebuild ends.</p>
        }
      } @else {
        <p>No rebuild, rebalance or resync in progress.</p>
      }
    } @else {
      <p class="cairn-muted">Rebuild progress is not available: the plugin server sent none with the system's health.</p>
    }
  `,
  styles: `
    .work { margin-top: 0; }
    .copy-bar { display: flex; align-items: center; gap: 0.5rem; margin: 0.5rem 0 0.2rem; }
    .copy-bar progress { flex: 1; height: 0.5rem; }
    .rebuild-facts { display: grid; grid-template-columns: auto 1fr; gap: 0.1rem 0.8rem; margin-top: 0.5rem; font-size: 0.65rem; }
    .rebuild-facts dt { font-weight: 600; }
    .rebuild-facts dd { margin: 0; }
  `,
})
export class RebuildComponent {
  // Decorated inputs into signals: the unit tests run in JIT, where
  // signal inputs (input()) are not registered without the CLI's compiler.
  readonly systemValue = signal('');
  readonly progressValue = signal<RebuildProgress | undefined>(undefined);
  @Input({ required: true }) set system(v: string) {
    this.systemValue.set(v);
  }
  @Input() set progress(v: RebuildProgress | undefined) {
    this.progressValue.set(v);
  }

  readonly bytesText = bytes;

  readonly work = computed(() => {
    const p = this.progressValue();
    if (!p) {
      return '';
    }
    const parts: string[] = [];
    if (p.rebuilding_groups) {
      parts.push(`rebuilding ${p.rebuilding_groups} placement groups`);
    }
    if (p.resyncing_groups) {
      parts.push(`resyncing ${p.resyncing_groups}`);
    }
    if (p.rebalancing_groups) {
      parts.push(`rebalancing ${p.rebalancing_groups}`);
    }
    const what = parts.length ? parts.join(', ') : 'copying data';
    return what.charAt(0).toUpperCase() + what.slice(1) + '.';
  });
  // Copy work is running or due: a degraded group is rebuilt as soon as the
  // SDSs report it, before they know how much there is to copy.
  readonly active = computed(() => {
    const p = this.progressValue();
    return !!p && (p.pending_bytes > 0 || p.degraded_groups > 0 || p.rebuilding_groups > 0 || p.resyncing_groups > 0 || p.rebalancing_groups > 0);
  });
  readonly label = computed(() => {
    const p = this.progressValue();
    if (p && (p.degraded_groups > 0 || p.rebuilding_groups > 0)) {
      return 'Rebuilding';
    }
    return p?.resyncing_groups ? 'Resyncing' : 'Rebalancing';
  });
  readonly percent = computed(() => `${(this.progressValue()?.percent ?? 0).toFixed(1)} %`);
  readonly rateText = computed(() => {
    const p = this.progressValue();
    if (!p?.observed_rate_bytes_per_second) {
      return 'measuring…';
    }
    return `${bandwidth(p.observed_rate_bytes_per_second)} over the last ${Math.round(p.window_seconds)} s`;
  });
  readonly etaText = computed(() => {
    const p = this.progressValue();
    if (!p || p.eta_state === 'estimating' || p.observed_eta_seconds === null) {
      return 'estimating…';
    }
    return eta(p.observed_eta_seconds);
  });
}
