import { Component, OnDestroy, OnInit, computed, inject, signal } from '@angular/core';
import { DatePipe } from '@angular/common';
import { FormsModule } from '@angular/forms';
import { ClarityModule } from '@clr/angular';
import { ApiError, ApiService } from '../core/api.service';
import { StoreService } from '../core/store.service';
import { SystemView } from '../core/types';
import { MessageComponent } from '../shared/message.component';

// MaintenanceComponent: roll hosts (or fault sets) through maintenance one
// at a time, with live progress; the operator confirms each patch step
// unless the plugin server has a patch hook. Starting again resumes.
@Component({
  selector: 'cairn-maintenance',
  imports: [ClarityModule, FormsModule, DatePipe, MessageComponent],
  template: `
    <div class="cairn-page">
      <h1 cds-text="title">Rolling maintenance</h1>
      <p>
        One host (or fault set) at a time: its SDS enters maintenance, the SVM shuts down, the host enters vSphere
        maintenance mode and is patched, then everything comes back and the data resyncs before the next one.
      </p>
      @if (store.error(); as err) {
        <clr-alert clrAlertType="danger" [clrAlertClosable]="false"><clr-alert-item><span class="alert-text"><cairn-message [text]="err" /></span></clr-alert-item></clr-alert>
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
          <button type="button" class="btn btn-primary" (click)="start(s)" [disabled]="running(s)">{{ resumable(s) ? 'Resume roll' : 'Start roll' }}</button>
          <button type="button" class="btn btn-outline" (click)="proceed(s)" [disabled]="!running(s)">Host patched: continue</button>
          <button type="button" class="btn btn-warning-outline" (click)="openStop(s)" [disabled]="!running(s)">Stop roll…</button>
        </div>
        @if (resumable(s) && s.maintenance; as m) {
          <div class="alert alert-sm" [class.alert-warning]="m.stopped" [class.alert-danger]="!m.stopped" role="status"><div class="alert-items"><div class="alert-item static"><div class="alert-text">
            @if (m.stopped) {Stopped by the operator.} @else {Stopped by an error: <cairn-message [text]="m.last_error" />}
            {{ m.done_units }} of {{ m.units.length }} done. <strong>Resume roll</strong> continues with {{ (m.units[m.done_units] ?? []).join(', ') }}
            (with the settings it was started with: by {{ m.request.by }}{{ m.request.hosts?.length ? ', hosts ' + m.request.hosts?.join(', ') : ', every host' }}).
          </div></div></div></div>
        }
        @if (s.maintenance?.unpatched?.length) {
          <div class="alert alert-warning alert-sm" role="status"><div class="alert-items"><div class="alert-item static"><div class="alert-text">
            Brought back without their patch by a stop: {{ unpatched(s) }}. Roll them again (choose them above) once the roll is over.
          </div></div></div></div>
        }
        @if (msg()) {
          <div class="alert alert-sm" [class.alert-danger]="msgErr()" [class.alert-info]="!msgErr()" role="status"><div class="alert-items"><div class="alert-item static"><div class="alert-text">{{ msg() }}</div></div></div></div>
        }
        @if (store.job('maintenance:' + s.name); as j) {
          <p class="roll-state">Roll: <span class="label" [class.label-info]="j.state === 'running'" [class.label-success]="j.state === 'succeeded'" [class.label-danger]="j.state === 'failed'" [class.label-warning]="j.state === 'stopped'">{{ j.state }}</span> <cairn-message [text]="j.error" /></p>
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
        <p class="cairn-muted"><strong>Stop roll</strong> stops safely: no host stays in maintenance mode, no SVM off, no SDS in maintenance. A roll that fails, or was stopped, resumes where it stopped.</p>
      } @empty {
        @if (store.systems() !== null) {
          <p>No deployed system.</p>
        }
      }
    </div>

    <clr-modal [(clrModalOpen)]="stopping" [clrModalSize]="'md'">
      <h3 class="modal-title">Stop the roll of {{ stopSystem }}?</h3>
      <div class="modal-body">
        <p>The roll stops safely, after it brings back the host (or fault set) it is on:</p>
        <ul>
          <li>Not touched yet: it stops at once; a resume starts with that host.</li>
          <li>Taken out but not patched yet: a wait for SDS maintenance or for your <em>Continue</em> ends at once; an SVM shutdown or a host entering maintenance mode finishes first. The host exits maintenance mode, its SVM powers on, its SDS leaves maintenance and the data resyncs. The host stays <strong>unpatched</strong>; a resume continues with the next host.</li>
          <li>Patched (or a patch command running: it is never cut short): the host comes back as usual; the roll stops before the next one.</li>
        </ul>
        @if (stopError()) {
          <div class="alert alert-danger alert-sm" role="alert"><div class="alert-items"><div class="alert-item static"><div class="alert-text">{{ stopError() }}</div></div></div></div>
        }
      </div>
      <div class="modal-footer">
        <button type="button" class="btn btn-outline" (click)="stopping = false">Keep rolling</button>
        <button type="button" class="btn btn-warning" (click)="confirmStop()">Stop roll</button>
      </div>
    </clr-modal>
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
  stopping = false;
  stopSystem = '';
  readonly stopError = signal<string | null>(null);

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

  // resumable: an unfinished roll (stopped or failed) is on record.
  resumable(s: SystemView): boolean {
    const m = s.maintenance;
    return !this.running(s) && !!m && !m.completed && (!!m.stopped || !!m.last_error || m.done_units > 0 || !!m.stopping);
  }

  unpatched(s: SystemView): string {
    return (s.maintenance?.unpatched ?? []).map((u) => u.join(' + ')).join(', ');
  }

  openStop(s: SystemView): void {
    this.stopSystem = s.name;
    this.stopError.set(null);
    this.stopping = true;
  }

  async confirmStop(): Promise<void> {
    try {
      const p = await this.api.stopMaintenance(this.stopSystem);
      this.stopping = false;
      this.msgErr.set(false);
      this.msg.set(`Stopping at ${p.hosts.join(', ') || 'the first host'} (step ${p.step || 'none'}): ${p.actions.join('; ')}.`);
      await this.store.refresh();
    } catch (e) {
      this.stopError.set(e instanceof ApiError ? e.message : String(e));
    }
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
      // A resume repeats the request the roll was started with (the
      // server refuses other settings for an unfinished roll).
      const r = this.resumable(s) ? s.maintenance?.request : undefined;
      const again = r ? { by: r.by, mode: r.mode, hosts: r.hosts } : undefined;
      await this.api.startMaintenance(
        s.name,
        again ?? {
          by: this.by,
          mode: this.mode || undefined,
          hosts: this.chosen.size ? (s.hosts ?? []).filter((h) => this.chosen.has(h)) : undefined,
        },
      );
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
