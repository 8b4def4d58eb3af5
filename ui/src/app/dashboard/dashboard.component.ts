import { Component, OnDestroy, OnInit, computed, inject } from '@angular/core';
import { DatePipe } from '@angular/common';
import { RouterLink } from '@angular/router';
import { ClarityModule } from '@clr/angular';
import { bytes } from '../core/format';
import { SdkService } from '../core/sdk.service';
import { StoreService } from '../core/store.service';
import { SystemHealth, SystemView } from '../core/types';
import { CapacityChartComponent } from '../shared/capacity-chart.component';
import { PerformanceComponent } from './performance.component';
import { RebuildComponent } from './rebuild.component';
import { MessageComponent } from '../shared/message.component';

// DashboardComponent: health at a glance (what is wrong, what to do),
// capacity, rebuild/resync, jobs and recent events, per system.
@Component({
  selector: 'cairn-dashboard',
  imports: [ClarityModule, CapacityChartComponent, DatePipe, RouterLink, MessageComponent, PerformanceComponent, RebuildComponent],
  template: `
    <div class="cairn-page">
      <h1 cds-text="title">Cairn dashboard</h1>
      @if (store.error(); as err) {
        <clr-alert clrAlertType="danger" [clrAlertClosable]="false"><clr-alert-item><span class="alert-text"><cairn-message [text]="err" /></span></clr-alert-item></clr-alert>
      }
      @if (store.systems() === null) {
        <clr-spinner clrMedium>Loading systems</clr-spinner>
      } @else if (store.systems()!.length === 0) {
        <div class="card"><div class="card-block">
          <h2 class="card-title">No Cairn system yet</h2>
          <p class="card-text">This plugin has not deployed a system. Deploy one on the cluster's hosts: it takes about ten minutes.</p>
        </div>
        <div class="card-footer">
          @if (!sdk.embedded || true) {
            <a class="btn btn-primary" routerLink="/global/deploy">Deploy Cairn</a>
          }
        </div></div>
      }
      @for (s of store.systems() ?? []; track s.name) {
        <section class="system" [attr.aria-labelledby]="'sys-' + s.name">
          <h2 [id]="'sys-' + s.name">System {{ s.name }} <span class="cairn-muted">({{ s.datacenter }}, {{ s.hosts?.length ?? 0 }} hosts)</span></h2>
          <div class="cairn-grid">
            <div class="card health">
              <div class="card-header">Health</div>
              <div class="card-block">
                @if (s.health; as h) {
                  @if (h.health.status === 'ok') {
                    <p><span class="label label-success">Healthy</span> All {{ h.health.sds_count }} SDSs up, every pool has two copies.</p>
                  } @else {
                    <p><span class="label label-danger">Needs attention</span> {{ h.health.sds_up_count }} of {{ h.health.sds_count }} SDSs up.</p>
                    <ul class="list">
                      @for (m of h.health.messages ?? []; track m) {
                        <li><cairn-message [text]="m" /></li>
                      }
                      @for (d of downUnexplained(h.health); track d) {
                        <li>SDS {{ d }} is down: check its SVM is powered on; its data is rebuilt from the other copy meanwhile.</li>
                      }
                    </ul>
                  }
                } @else {
                  <p><span class="label label-warning">Unknown</span> {{ s.unavailable }}</p>
                  @if (!s.deploy.completed) {
                    <a class="btn btn-sm btn-outline" routerLink="/global/deploy">Open the deployment</a>
                  }
                }
              </div>
            </div>
            <div class="card">
              <div class="card-header">Capacity</div>
              <div class="card-block">
                @if (s.health; as h) {
                  <cairn-capacity-chart [raw]="h.capacity.raw" [usable]="h.capacity.usable" [used]="h.capacity.allocated" />
                  <p class="cairn-muted">Thin provisioned: {{ provisioned(s) }} in {{ s.volumes?.length ?? 0 }} volumes.</p>
                } @else {
                  <p class="cairn-muted">Not available until the gateway answers.</p>
                }
              </div>
            </div>
            <div class="card">
              <div class="card-header">Rebuild, rebalance and resync</div>
              <div class="card-block">
                @if (s.health) {
                  <cairn-rebuild [system]="s.name" [progress]="s.rebuild" />
                  @for (d of resyncing(s); track d.id) {
                    <p class="cairn-muted">SDS {{ d.name }}: {{ d.maintenance?.state }}</p>
                  }
                } @else {
                  <p class="cairn-muted">Not available.</p>
                }
              </div>
            </div>
          </div>
          <div class="card performance">
            <div class="card-header">Performance</div>
            <div class="card-block">
              @if (s.health) {
                <cairn-performance [system]="s" />
              } @else {
                <p class="cairn-muted">Not available until the gateway answers.</p>
              }
            </div>
          </div>
        </section>
      }
      <section class="cairn-grid recent">
        <div class="card">
          <div class="card-header">Jobs</div>
          <div class="card-block">
            @if (store.jobs().length === 0) {
              <p class="cairn-muted">No job has run since the plugin server started.</p>
            }
            <ul class="list-unstyled">
              @for (j of store.jobs(); track j.name) {
                <li>
                  <span class="label" [class.label-info]="j.state === 'running'" [class.label-success]="j.state === 'succeeded'" [class.label-danger]="j.state === 'failed'" [class.label-warning]="j.state === 'interrupted'">{{ j.state }}</span>
                  {{ j.name }} <span class="cairn-muted">{{ j.started | date: 'medium' }}</span>
                  @if (j.error) {
                    <div class="error-text"><cairn-message [text]="j.error" /></div>
                  }
                </li>
              }
            </ul>
          </div>
        </div>
        <div class="card">
          <div class="card-header">Alerts and recent events</div>
          <div class="card-block">
            <div class="cairn-log" role="log" aria-label="Recent events" tabindex="0">
              @for (e of recent(); track e.seq) {
                <div [class]="e.level">{{ e.time | date: 'HH:mm:ss' }} {{ e.job }} {{ e.host ? '[' + e.host + ']' : '' }} {{ e.message }}</div>
              } @empty {
                <div class="cairn-muted">No events yet.</div>
              }
            </div>
          </div>
        </div>
      </section>
    </div>
  `,
  styles: `
    .system { margin-bottom: 1.2rem; }
    .system .cairn-grid { grid-template-columns: repeat(auto-fit, minmax(15rem, 1fr)); }
    .recent { margin-top: 1rem; }
    .performance { margin-top: 1rem; }
    .error-text { color: var(--cds-alias-status-danger, #c21d00); font-size: 0.65rem; }
  `,
})
export class DashboardComponent implements OnInit, OnDestroy {
  readonly store = inject(StoreService);
  readonly sdk = inject(SdkService);
  private stop: (() => void) | null = null;
  readonly recent = computed(() => this.store.events().slice(-40).reverse());

  ngOnInit(): void {
    this.stop = this.store.watch();
  }

  ngOnDestroy(): void {
    this.stop?.();
  }

  provisioned(s: SystemView): string {
    return bytes((s.volumes ?? []).reduce((a, v) => a + v.size, 0));
  }

  // downUnexplained: the down SDSs the gateway's own messages do not
  // already name (older gateways send no message per SDS).
  downUnexplained(h: SystemHealth['health']): string[] {
    const msgs = h.messages ?? [];
    return (h.sds_down_names ?? []).filter((d) => !msgs.some((m) => m.startsWith(`SDS ${d} `)));
  }

  resyncing(s: SystemView) {
    return (s.sdss ?? []).filter((d) => d.maintenance?.state === 'resyncing' || d.maintenance?.state === 'entering');
  }
}
