import { Component, OnDestroy, OnInit, computed, inject, signal } from '@angular/core';
import { DatePipe } from '@angular/common';
import { FormsModule } from '@angular/forms';
import { ClarityModule } from '@clr/angular';
import { ApiError, ApiService } from '../core/api.service';
import { StoreService } from '../core/store.service';
import { SystemView } from '../core/types';

// MaintenanceComponent: roll hosts (or fault sets) through maintenance one
// at a time, with live progress; the operator confirms each patch step
// unless the plugin server has a patch hook. Starting again resumes.
@Component({
  selector: 'cairn-maintenance',
  imports: [ClarityModule, FormsModule, DatePipe],
  template: `
    <div class="cairn-page">
      <h1 cds-text="title">Rolling maintenance</h1>
      <p>
        One host (or fault set) at a time: its SDS enters maintenance, the SVM shuts down, the host enters vSphere
        maintenance mode and is patched, then everything comes back and the data resyncs before the next one.
      </p>
      @if (store.error(); as err) {
        <clr-alert clrAlertType="danger" [clrAlertClosable]="false"><clr-alert-item><span class="alert-text">{{ err }}</span></clr-alert-item></clr-alert>
      }
      @for (s of deployed(); track s.name) {
        <h2>System {{ s.name }}</h2>
        <form clrForm clrLayout="horizontal" [attr.aria-label]="'Maintenance of ' + s.name">
          <clr-radio-container clrInline>
            <label>Roll by</label>
            <clr-radio-wrapper>
              <input type="radio" clrRadio name="by" id="by-host" value="host" [(ngModel)]="by" />
              <label for="by-host">Host</label>
            </clr-radio-wrapper>
            <clr-radio-wrapper>
              <input type="radio" clrRadio name="by" id="by-fs" value="faultset" [(ngModel)]="by" />
              <label for="by-fs">Fault set</label>
            </clr-radio-wrapper>
          </clr-radio-container>
          <clr-select-container>
            <label for="mode">SDS maintenance mode</label>
            <select clrSelect id="mode" name="mode" [(ngModel)]="mode">
              <option value="">The plan's default</option>
              <option value="instant">Instant</option>
              <option value="protected">Protected</option>
            </select>
          </clr-select-container>
        </form>
        <fieldset class="hosts">
          <legend>Hosts to roll, in order (none chosen: all)</legend>
          @for (h of s.hosts ?? []; track h) {
            <clr-checkbox-wrapper>
              <input type="checkbox" clrCheckbox [id]="'mh-' + h" [checked]="chosen.has(h)" (change)="toggle(h, $any($event.target).checked)" />
              <label [for]="'mh-' + h">{{ h }}</label>
            </clr-checkbox-wrapper>
          }
        </fieldset>
        <div class="actions">
          <button type="button" class="btn btn-primary" (click)="start(s)" [disabled]="running(s)">{{ failed(s) ? 'Resume roll' : 'Start roll' }}</button>
          <button type="button" class="btn btn-outline" (click)="proceed(s)" [disabled]="!running(s)">Host patched: continue</button>
        </div>
        @if (msg()) {
          <div class="alert alert-sm" [class.alert-danger]="msgErr()" [class.alert-info]="!msgErr()" role="status"><div class="alert-items"><div class="alert-item static"><div class="alert-text">{{ msg() }}</div></div></div></div>
        }
        @if (store.job('maintenance:' + s.name); as j) {
          <p class="roll-state">Roll: <span class="label" [class.label-info]="j.state === 'running'" [class.label-success]="j.state === 'succeeded'" [class.label-danger]="j.state === 'failed'">{{ j.state }}</span> {{ j.error }}</p>
          @if (j.state === 'running') {
            <clr-progress-bar clrLoop aria-label="Rolling maintenance running"></clr-progress-bar>
          }
        }
        <div class="cairn-log" role="log" aria-label="Maintenance log (newest first)" tabindex="0">
          @for (e of events(s.name); track e.seq) {
            <div [class]="e.level">{{ e.time | date: 'HH:mm:ss' }} {{ e.host ? '[' + e.host + ']' : '' }} {{ e.message }}</div>
          } @empty {
            <div class="cairn-muted">No maintenance has run since the plugin server started.</div>
          }
        </div>
        <p class="cairn-muted">Stopping a roll between hosts is not offered yet: the plugin server has no stop route. A roll that fails resumes where it stopped.</p>
      } @empty {
        @if (store.systems() !== null) {
          <p>No deployed system.</p>
        }
      }
    </div>
  `,
  styles: `
    .hosts { border: 0; padding: 0; margin: 0.6rem 0; }
    .actions { margin: 0.6rem 0; }
  `,
})
export class MaintenanceComponent implements OnInit, OnDestroy {
  readonly store = inject(StoreService);
  private api = inject(ApiService);
  private stop: (() => void) | null = null;
  readonly deployed = computed(() => (this.store.systems() ?? []).filter((s) => s.deploy.completed));
  readonly msg = signal<string | null>(null);
  readonly msgErr = signal(false);
  by: 'host' | 'faultset' = 'host';
  mode: '' | 'instant' | 'protected' = '';
  chosen = new Set<string>();

  ngOnInit(): void {
    this.stop = this.store.watch(1500);
  }

  ngOnDestroy(): void {
    this.stop?.();
  }

  toggle(h: string, on: boolean): void {
    if (on) {
      this.chosen.add(h);
    } else {
      this.chosen.delete(h);
    }
  }

  running(s: SystemView): boolean {
    return this.store.job('maintenance:' + s.name)?.state === 'running';
  }

  failed(s: SystemView): boolean {
    return this.store.job('maintenance:' + s.name)?.state === 'failed';
  }

  events(system: string) {
    return this.store
      .events()
      .filter((e) => e.job === 'maintenance:' + system)
      .slice(-200)
      .reverse();
  }

  async start(s: SystemView): Promise<void> {
    this.msg.set(null);
    try {
      await this.api.startMaintenance(s.name, {
        by: this.by,
        mode: this.mode || undefined,
        hosts: this.chosen.size ? (s.hosts ?? []).filter((h) => this.chosen.has(h)) : undefined,
      });
      this.msgErr.set(false);
      this.msg.set('Roll started: follow it below.');
      await this.store.refresh();
    } catch (e) {
      this.msgErr.set(true);
      this.msg.set(e instanceof ApiError ? e.message : String(e));
    }
  }

  async proceed(s: SystemView): Promise<void> {
    try {
      await this.api.continueMaintenance(s.name);
      this.msgErr.set(false);
      this.msg.set('Confirmed: the roll brings the host back and moves on.');
    } catch (e) {
      this.msgErr.set(true);
      this.msg.set(e instanceof ApiError ? e.message : String(e));
    }
  }
}
