import { Component, OnDestroy, OnInit, inject, signal } from '@angular/core';
import { FormsModule } from '@angular/forms';
import { ClarityModule } from '@clr/angular';
import { ApiError, ApiService } from '../core/api.service';
import { bytes } from '../core/format';
import { StoreService } from '../core/store.service';
import { CandidateDisk, Device, ProgressEvent, SDS, SDSDisks, SystemView } from '../core/types';
import { deviceJobs, drainOf, eta } from './devices';
import { MessageComponent } from '../shared/message.component';

// SdsComponent: the SDSs and their devices, per system (datagrids), with
// day-2 work: add a device (a disk of the SDS's host, attached to its SVM
// as an RDM when it is not yet) and remove one (drained first, with live
// progress that survives a page reload: the jobs and their events are the
// server's).
@Component({
  selector: 'cairn-sds',
  imports: [ClarityModule, FormsModule, MessageComponent],
  template: `
    <div class="cairn-page">
      <h1 cds-text="title">SDSs and devices</h1>
      @if (store.error(); as err) {
        <clr-alert clrAlertType="danger" [clrAlertClosable]="false"><clr-alert-item><span class="alert-text"><cairn-message [text]="err" /></span></clr-alert-item></clr-alert>
      }
      @for (s of store.systems() ?? []; track s.name) {
        <h2>System {{ s.name }}</h2>
        @if (s.unavailable) {
          <clr-alert clrAlertType="warning" [clrAlertClosable]="false"><clr-alert-item><span class="alert-text">{{ s.unavailable }}</span></clr-alert-item></clr-alert>
        } @else {
          <clr-datagrid aria-label="SDSs">
            <clr-dg-column [clrDgSortBy]="'name'">SDS</clr-dg-column>
            <clr-dg-column [clrDgSortBy]="'address'">Address</clr-dg-column>
            <clr-dg-column [clrDgSortBy]="'state'">State</clr-dg-column>
            <clr-dg-column>Connection</clr-dg-column>
            <clr-dg-column>Devices</clr-dg-column>
            <clr-dg-column>Capacity</clr-dg-column>
            <clr-dg-column>Actions</clr-dg-column>
            <clr-dg-row *clrDgItems="let d of s.sdss ?? []" [clrDgItem]="d">
              <clr-dg-cell>{{ d.name }}</clr-dg-cell>
              <clr-dg-cell>{{ d.address }}</clr-dg-cell>
              <clr-dg-cell>{{ d.state }}{{ d.maintenance?.state ? ' (' + d.maintenance?.state + ')' : '' }}</clr-dg-cell>
              <clr-dg-cell>
                <span class="label" [class.label-success]="d.up" [class.label-danger]="!d.up">{{ d.up ? 'up' : 'down' }}</span>
              </clr-dg-cell>
              <clr-dg-cell>{{ devicesOf(s, d.id).length }}</clr-dg-cell>
              <clr-dg-cell>{{ capacityOf(s, d.id) }}</clr-dg-cell>
              <clr-dg-cell>
                <button type="button" class="btn btn-link btn-sm cell-action" [attr.aria-label]="'Add device to ' + d.name" (click)="openAdd(s, d)">Add device…</button>
              </clr-dg-cell>
            </clr-dg-row>
            <clr-dg-footer>{{ s.sdss?.length ?? 0 }} SDSs</clr-dg-footer>
          </clr-datagrid>
          <h3>Devices</h3>
          <clr-datagrid aria-label="Devices">
            <clr-dg-column [clrDgSortBy]="'name'">Device</clr-dg-column>
            <clr-dg-column>SDS</clr-dg-column>
            <clr-dg-column [clrDgSortBy]="'path'">Path</clr-dg-column>
            <clr-dg-column [clrDgSortBy]="'state'">State</clr-dg-column>
            <clr-dg-column>Capacity</clr-dg-column>
            <clr-dg-column>Actions</clr-dg-column>
            <clr-dg-row *clrDgItems="let v of s.devices ?? []" [clrDgItem]="v">
              <clr-dg-cell>{{ v.name || v.id }}</clr-dg-cell>
              <clr-dg-cell>{{ sdsName(s, v.sds_id) }}</clr-dg-cell>
              <clr-dg-cell><code>{{ v.path }}</code></clr-dg-cell>
              <clr-dg-cell>
                {{ v.state }}
                @if (drain(s, v); as d) {
                  <div class="drain">
                    <clr-progress-bar [clrValue]="d.percent ?? 0" clrMax="100" [attr.aria-label]="'Drain of ' + (v.name || v.id)"></clr-progress-bar>
                    <span class="cairn-muted">{{ d.percent ?? 0 }}%{{ etaOf(d) }}</span>
                  </div>
                }
              </clr-dg-cell>
              <clr-dg-cell>{{ size(v.capacity) }}</clr-dg-cell>
              <clr-dg-cell>
                @if (v.state === 'removing' && !drain(s, v)) {
                  <button type="button" class="btn btn-link btn-sm cell-action" [attr.aria-label]="'Follow removal of ' + (v.name || v.id)" (click)="remove(s, v)">Follow removal</button>
                } @else {
                  <button type="button" class="btn btn-link btn-sm cell-action" [attr.aria-label]="'Remove device ' + (v.name || v.id)" [disabled]="v.state !== 'normal'" (click)="openRemove(s, v)">Remove…</button>
                }
              </clr-dg-cell>
            </clr-dg-row>
            <clr-dg-footer>{{ s.devices?.length ?? 0 }} devices</clr-dg-footer>
          </clr-datagrid>
          @for (j of jobsOf(s); track j.name) {
            <div class="card job-card">
              <div class="card-header">Job {{ j.name }}: <span class="label" [class.label-info]="j.state === 'running'" [class.label-success]="j.state === 'succeeded'" [class.label-danger]="j.state === 'failed'">{{ j.state }}</span></div>
              <div class="card-block">
                @if (j.error) {
                  <p class="error-text" role="alert"><cairn-message [text]="j.error" /></p>
                }
                <div class="cairn-log" role="log" [attr.aria-label]="'Log of ' + j.name" tabindex="0">
                  @for (e of eventsOf(j.name); track e.seq) {
                    <div [class]="e.level">{{ e.host ? '[' + e.host + ']' : '' }} {{ e.message }}</div>
                  }
                </div>
              </div>
            </div>
          }
        }
      } @empty {
        <p>No system deployed yet.</p>
      }
    </div>

    <clr-modal [(clrModalOpen)]="adding" [clrModalSize]="'lg'">
      <h3 class="modal-title">Add a device to {{ addSDS?.name }}</h3>
      <div class="modal-body">
        @if (disks(); as dl) {
          <p>Disks of host <strong>{{ dl.host }}</strong>. A disk the SVM {{ dl.svm }} does not map yet is attached to it as a raw device mapping (RDM, physical mode) while it runs; its SDS then checks that the disk is empty, clears it and adds it to the pool. Data on the disk is lost.</p>
          <fieldset class="choices" aria-label="Disk to add">
            <legend class="clr-sr-only">Disk to add</legend>
            @for (d of dl.disks; track d.canonical_name) {
              <div class="choice" [class.off]="!d.available">
                <input type="radio" name="disk" [id]="'disk-' + d.canonical_name" [value]="d.canonical_name" [(ngModel)]="chosenDisk" [disabled]="!d.available" (ngModelChange)="addError.set(null)" />
                <label [for]="'disk-' + d.canonical_name">
                  <strong>{{ d.display_name }}</strong> · {{ size(d.size) }} · {{ d.ssd ? 'SSD' : 'HDD' }} ·
                  {{ d.attached ? 'RDM, attached to the SVM' : d.available ? 'RDM, will be attached' : d.local ? 'local' : 'shared' }}
                  <br /><code>{{ d.canonical_name }}</code>
                  @if (!d.available) {
                    <br /><span class="cairn-muted">Not available: {{ d.reason }}</span>
                  } @else if (d.used_by && !d.attached) {
                    <br /><span class="warn">In use by {{ d.used_by }}</span>
                  }
                </label>
              </div>
            }
            @for (p of dl.pci; track p.id) {
              <div class="choice" [class.off]="!p.available">
                <input type="radio" name="disk" [id]="'pci-' + p.id" [value]="'pci:' + p.id" [(ngModel)]="chosenDisk" [disabled]="!p.available" />
                <label [for]="'pci-' + p.id"><strong>{{ p.vendor }} {{ p.device }}</strong> · PCI {{ p.id }} · passthrough to the SVM
                  @if (!p.available) {
                    <br /><span class="cairn-muted">Not available: {{ p.reason }}</span>
                  }
                </label>
              </div>
            }
          </fieldset>
          @if (!anyAvailable(dl)) {
            <div class="alert alert-warning alert-sm" role="status"><div class="alert-items"><div class="alert-item static"><div class="alert-text">No free disk on {{ dl.host }}: every local disk is a Cairn device, in use, or cannot be mapped raw. Free a disk in vSphere (or add one to the host), then open this dialog again.</div></div></div></div>
          }
          <form clrForm clrLayout="horizontal" aria-label="New device" (ngSubmit)="add()">
            <clr-input-container>
              <label for="dev-pool">Storage pool</label>
              <input clrInput id="dev-pool" name="pool" [(ngModel)]="pool" required />
            </clr-input-container>
            <clr-input-container>
              <label for="dev-name">Device name (optional)</label>
              <input clrInput id="dev-name" name="dname" [(ngModel)]="devName" />
              <clr-control-helper>Empty: the gateway names it.</clr-control-helper>
            </clr-input-container>
          </form>
        } @else if (!addError()) {
          <clr-spinner clrInline>Loading</clr-spinner> Reading the disks of the host…
        }
        @if (addError()) {
          <div class="alert alert-danger alert-sm" role="alert"><div class="alert-items"><div class="alert-item static"><div class="alert-text">{{ addError() }}</div></div></div></div>
        }
      </div>
      <div class="modal-footer">
        <button type="button" class="btn btn-outline" (click)="adding = false">Cancel</button>
        <button type="button" class="btn btn-primary" [disabled]="!chosenDisk || busy()" (click)="add()">Add device</button>
      </div>
    </clr-modal>

    <clr-modal [(clrModalOpen)]="removing" [clrModalSize]="'md'">
      <h3 class="modal-title">Remove device {{ removeDev?.name || removeDev?.id }}?</h3>
      <div class="modal-body">
        <p>Device <code>{{ removeDev?.path }}</code> of {{ removeSDS }} ({{ size(removeDev?.capacity) }}) is drained first: every copy on it moves to the pool's other devices, so the data keeps two copies all the time. That takes a while for a full device; the progress shows here and in the device list, also after a reload. Then the device is deleted. The disk stays attached to the SVM: add it again later, or detach it in vSphere to use it elsewhere.</p>
        <p>The gateway refuses when the rest of the pool cannot hold the data on two fault domains.</p>
        @if (removeError()) {
          <div class="alert alert-danger alert-sm" role="alert"><div class="alert-items"><div class="alert-item static"><div class="alert-text">{{ removeError() }}</div></div></div></div>
        }
      </div>
      <div class="modal-footer">
        <button type="button" class="btn btn-outline" (click)="removing = false">Cancel</button>
        <button type="button" class="btn btn-danger" [disabled]="busy()" (click)="confirmRemove()">Drain and remove</button>
      </div>
    </clr-modal>
  `,
  styles: `
    .choices { border: 0; padding: 0; margin: 0.6rem 0; max-height: 18rem; overflow-y: auto; }
    .choice { display: flex; gap: 0.6rem; align-items: flex-start; padding: 0.3rem 0; border-bottom: 1px solid var(--cds-alias-object-border-color, #ccc); }
    .choice input { margin-top: 0.3rem; }
    .warn { color: var(--cds-alias-status-warning-shade, #8a5a00); }
    .drain { min-width: 10rem; }
    .job-card { margin-top: 1rem; }
  `,
})
export class SdsComponent implements OnInit, OnDestroy {
  readonly store = inject(StoreService);
  private api = inject(ApiService);
  private stop: (() => void) | null = null;
  readonly disks = signal<SDSDisks | null>(null);
  readonly addError = signal<string | null>(null);
  readonly removeError = signal<string | null>(null);
  readonly busy = signal(false);
  adding = false;
  addSystem = '';
  addSDS: SDS | null = null;
  chosenDisk = '';
  pool = '';
  devName = '';
  removing = false;
  removeSystem = '';
  removeSDS = '';
  removeDev: Device | null = null;

  ngOnInit(): void {
    this.stop = this.store.watch(2000);
  }

  ngOnDestroy(): void {
    this.stop?.();
  }

  devicesOf(s: SystemView, sds: string) {
    return (s.devices ?? []).filter((d) => d.sds_id === sds);
  }

  capacityOf(s: SystemView, sds: string): string {
    return bytes(this.devicesOf(s, sds).reduce((a, d) => a + d.capacity, 0));
  }

  sdsName(s: SystemView, id: string): string {
    return (s.sdss ?? []).find((d) => d.id === id)?.name ?? id;
  }

  size(n: number | undefined): string {
    return bytes(n);
  }

  jobsOf(s: SystemView) {
    return deviceJobs(this.store.jobs(), s.name);
  }

  eventsOf(job: string): ProgressEvent[] {
    return this.store
      .events()
      .filter((e) => e.job === job)
      .slice(-100)
      .reverse();
  }

  drain(s: SystemView, v: Device): ProgressEvent | null {
    return drainOf(this.store.jobs(), this.store.events(), s.name, v);
  }

  etaOf(e: ProgressEvent): string {
    return eta(e.eta_seconds);
  }

  anyAvailable(dl: SDSDisks): boolean {
    return dl.disks.some((d: CandidateDisk) => d.available) || dl.pci.some((p) => p.available);
  }

  async openAdd(s: SystemView, d: SDS): Promise<void> {
    this.addSystem = s.name;
    this.addSDS = d;
    this.chosenDisk = '';
    this.devName = '';
    this.pool = s.pool;
    this.disks.set(null);
    this.addError.set(null);
    this.adding = true;
    try {
      const dl = await this.api.sdsDisks(s.name, d.name);
      this.disks.set(dl);
      this.pool = dl.pool || s.pool;
    } catch (e) {
      this.addError.set(e instanceof ApiError ? e.message : String(e));
    }
  }

  async add(): Promise<void> {
    if (!this.addSDS || !this.chosenDisk) {
      this.addError.set('Choose a disk to add.');
      return;
    }
    this.busy.set(true);
    this.addError.set(null);
    const pci = this.chosenDisk.startsWith('pci:') ? this.chosenDisk.slice(4) : undefined;
    try {
      await this.api.addDevice(this.addSystem, {
        sds: this.addSDS.name,
        disk: pci ? undefined : this.chosenDisk,
        pci,
        pool: this.pool || undefined,
        name: this.devName || undefined,
      });
      this.adding = false;
      await this.store.refresh();
    } catch (e) {
      this.addError.set(e instanceof ApiError ? e.message : String(e));
    } finally {
      this.busy.set(false);
    }
  }

  openRemove(s: SystemView, v: Device): void {
    this.removeSystem = s.name;
    this.removeSDS = this.sdsName(s, v.sds_id);
    this.removeDev = v;
    this.removeError.set(null);
    this.removing = true;
  }

  async confirmRemove(): Promise<void> {
    if (!this.removeDev) {
      return;
    }
    this.busy.set(true);
    try {
      await this.api.removeDevice(this.removeSystem, this.removeDev.name || this.removeDev.id);
      this.removing = false;
      await this.store.refresh();
    } catch (e) {
      this.removeError.set(e instanceof ApiError ? e.message : String(e));
    } finally {
      this.busy.set(false);
    }
  }

  // remove (again) follows a drain the plugin server is not following
  // (after its restart): the gateway answers the running drain.
  async remove(s: SystemView, v: Device): Promise<void> {
    try {
      await this.api.removeDevice(s.name, v.name || v.id);
      await this.store.refresh();
    } catch (e) {
      this.store.error.set(e instanceof ApiError ? e.message : String(e));
    }
  }
}
