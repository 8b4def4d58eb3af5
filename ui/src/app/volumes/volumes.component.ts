import { Component, OnDestroy, OnInit, computed, inject, signal } from '@angular/core';
import { NgTemplateOutlet } from '@angular/common';
import { FormsModule } from '@angular/forms';
import { ClarityModule } from '@clr/angular';
import { ApiError, ApiService } from '../core/api.service';
import { MiB, bytes, qosLimits } from '../core/format';
import { StoreService } from '../core/store.service';
import { Job, SystemView, Volume, VolumeAccess, VolumeQoS } from '../core/types';
import { MessageComponent } from '../shared/message.component';

// VolumesComponent: the volumes of each system, and "create a volume and
// its VMFS datastore on the hosts" as a job with live progress.
@Component({
  selector: 'cairn-volumes',
  imports: [ClarityModule, FormsModule, MessageComponent, NgTemplateOutlet],
  template: `
    <div class="cairn-page">
      <h1 cds-text="title">Volumes</h1>
      @if (store.error(); as err) {
        <clr-alert clrAlertType="danger" [clrAlertClosable]="false"><clr-alert-item><span class="alert-text"><cairn-message [text]="err" /></span></clr-alert-item></clr-alert>
      }
      @for (s of deployed(); track s.name) {
        <h2>System {{ s.name }}</h2>
        <button type="button" class="btn btn-primary btn-sm" (click)="openCreate(s)">Create volume and datastore…</button>
        <clr-datagrid aria-label="Volumes">
          <clr-dg-column [clrDgSortBy]="'name'">Volume</clr-dg-column>
          <clr-dg-column>Size</clr-dg-column>
          <clr-dg-column>Provisioning</clr-dg-column>
          <clr-dg-column>Mapped to</clr-dg-column>
          <clr-dg-column>QoS limits</clr-dg-column>
          <clr-dg-column>LUN (naa.)</clr-dg-column>
          <clr-dg-row *clrDgItems="let v of s.volumes ?? []" [clrDgItem]="v">
            <clr-dg-cell>
              <span>{{ v.name }}</span>
              <button type="button" class="btn btn-link btn-sm cell-action" [attr.aria-label]="'Delete ' + v.name" (click)="openDelete(s, v)">Delete</button>
            </clr-dg-cell>
            <clr-dg-cell>
              {{ size(v.size) }}
              <button type="button" class="btn btn-link btn-sm cell-action" [attr.aria-label]="'Grow ' + v.name" (click)="openGrow(s, v)">Grow</button>
            </clr-dg-cell>
            <clr-dg-cell>{{ v.thin ? 'thin' : 'thick' }}</clr-dg-cell>
            <clr-dg-cell>
              <span [class.cairn-muted]="!v.mappings?.length">{{ mappedTo(v) }}</span>
              <button type="button" class="btn btn-link btn-sm cell-action" [attr.aria-label]="'Map ' + v.name + ' to hosts'" (click)="openHosts(s, v, 'map')">Map</button>
              @if (v.mappings?.length) {
                <button type="button" class="btn btn-link btn-sm cell-action" [attr.aria-label]="'Unmap ' + v.name + ' from hosts'" (click)="openHosts(s, v, 'unmap')">Unmap</button>
              }
            </clr-dg-cell>
            <clr-dg-cell>
              <span class="qos" [class.cairn-muted]="!v.effective_iops_limit && !v.effective_bandwidth_limit">{{ limits(v) }}</span>
              <button type="button" class="btn btn-link btn-sm cell-action" [attr.aria-label]="'Edit the QoS limits of ' + v.name" (click)="openQoS(s, v)">Edit</button>
            </clr-dg-cell>
            <clr-dg-cell><code>{{ v.wwn }}</code></clr-dg-cell>
          </clr-dg-row>
          <clr-dg-placeholder>No volume yet: create one, the plugin also makes its datastore.</clr-dg-placeholder>
          <clr-dg-footer>{{ s.volumes?.length ?? 0 }} {{ (s.volumes?.length ?? 0) === 1 ? 'volume' : 'volumes' }}</clr-dg-footer>
        </clr-datagrid>
        <p class="cairn-muted">QoS limits apply at once, on every host's path to the volume. <em>Grow</em> grows the volume and its datastore on every host. <em>Map</em> gives hosts the LUN and mounts its datastore; <em>Unmap</em> and <em>Delete</em> first unmount the datastore and detach the LUN on the hosts, as vSphere's own Unmount and Detach do.</p>
      } @empty {
        @if (store.systems() !== null) {
          <p>No deployed system: deploy one first (Deploy page).</p>
        }
      }
      @if (job(); as j) {
        <div class="card job-card">
          <div class="card-header">Job {{ j.name }}: <span class="label" [class.label-info]="j.state === 'running'" [class.label-success]="j.state === 'succeeded'" [class.label-danger]="j.state === 'failed'">{{ j.state }}</span></div>
          <div class="card-block">
            @if (j.error) {
              <p class="error-text"><cairn-message [text]="j.error" /></p>
            }
            <div class="cairn-log" role="log" aria-label="Volume job log" tabindex="0">
              @for (e of jobEvents(); track e.seq) {
                <div [class]="e.level">{{ e.host ? '[' + e.host + ']' : '' }} {{ e.message }}</div>
              }
            </div>
          </div>
        </div>
      }
    </div>

    <clr-modal [(clrModalOpen)]="creating" [clrModalSize]="'md'">
      <h3 class="modal-title">Create volume on {{ target?.name }}</h3>
      <div class="modal-body">
        <form clrForm clrLayout="horizontal" aria-label="New volume" (ngSubmit)="create()">
          <clr-input-container>
            <label for="vol-name">Name</label>
            <input clrInput id="vol-name" name="name" [(ngModel)]="name" required />
            <clr-control-helper>Also the datastore's name.</clr-control-helper>
          </clr-input-container>
          <clr-input-container>
            <label for="vol-size">Size (GiB)</label>
            <input clrInput type="number" id="vol-size" name="size" min="1" [(ngModel)]="sizeGiB" required />
            <clr-control-helper>Multiples of 8 GiB use the capacity best.</clr-control-helper>
          </clr-input-container>
          <clr-checkbox-container>
            <label>Provisioning</label>
            <clr-checkbox-wrapper>
              <input type="checkbox" clrCheckbox id="vol-thin" name="thin" [(ngModel)]="thin" />
              <label for="vol-thin">Thin (space allocated on write)</label>
            </clr-checkbox-wrapper>
          </clr-checkbox-container>
          <fieldset class="hosts">
            <legend>Hosts that mount the datastore</legend>
            @for (h of target?.hosts ?? []; track h) {
              <clr-checkbox-wrapper>
                <input type="checkbox" clrCheckbox [id]="'vh-' + h" [name]="'vh-' + h" [checked]="hosts.has(h)" (change)="toggle(h, $any($event.target).checked)" />
                <label [for]="'vh-' + h">{{ h }}</label>
              </clr-checkbox-wrapper>
            }
          </fieldset>
        </form>
        @if (formError()) {
          <div class="alert alert-danger alert-sm" role="alert"><div class="alert-items"><div class="alert-item static"><div class="alert-text">{{ formError() }}</div></div></div></div>
        }
      </div>
      <div class="modal-footer">
        <button type="button" class="btn btn-outline" (click)="creating = false">Cancel</button>
        <button type="button" class="btn btn-primary" (click)="create()" [disabled]="busy()">Create</button>
      </div>
    </clr-modal>

    <clr-modal [(clrModalOpen)]="growing" [clrModalSize]="'md'">
      <h3 class="modal-title">Grow {{ growVolumeOf?.name }}</h3>
      <div class="modal-body">
        <p>The volume grows first, then every host rescans and its VMFS datastore grows over the new space. Volumes do not shrink.</p>
        <form clrForm clrLayout="horizontal" aria-label="Grow volume" (ngSubmit)="grow()">
          <clr-input-container>
            <label for="grow-size">New size (GiB)</label>
            <input clrInput type="number" id="grow-size" name="size" min="1" step="1" [(ngModel)]="growGiB" (ngModelChange)="growError.set(null)" required />
            <clr-control-helper>Now {{ growVolumeOf ? size(growVolumeOf.size) : '' }}.</clr-control-helper>
          </clr-input-container>
        </form>
        @if (growError()) {
          <div class="alert alert-danger alert-sm" role="alert"><div class="alert-items"><div class="alert-item static"><div class="alert-text">{{ growError() }}</div></div></div></div>
        }
      </div>
      <div class="modal-footer">
        <button type="button" class="btn btn-outline" (click)="growing = false">Cancel</button>
        <button type="button" class="btn btn-primary" (click)="grow()" [disabled]="busy()">Grow</button>
      </div>
    </clr-modal>

    <clr-modal [(clrModalOpen)]="editingQoS" [clrModalSize]="'md'">
      <h3 class="modal-title">QoS limits of {{ qosVolume?.name }}</h3>
      <div class="modal-body">
        <p>A limit holds for the volume as a whole, however many hosts use it, and changes within a second. Empty or 0: unlimited.</p>
        <form clrForm clrLayout="horizontal" aria-label="QoS limits" (ngSubmit)="saveQoS()">
          <clr-input-container>
            <label for="qos-iops">IOPS limit</label>
            <input clrInput type="number" id="qos-iops" name="iops" min="0" step="1" [(ngModel)]="iopsLimit" (ngModelChange)="qosError.set(null)" />
            <clr-control-helper>I/Os per second, reads and writes together.</clr-control-helper>
          </clr-input-container>
          <clr-input-container>
            <label for="qos-bw">Bandwidth limit (MiB/s)</label>
            <input clrInput type="number" id="qos-bw" name="bandwidth" min="0" step="any" [(ngModel)]="bandwidthMiB" (ngModelChange)="qosError.set(null)" />
            <clr-control-helper>At least 0.0625 MiB/s (64 KiB/s).</clr-control-helper>
          </clr-input-container>
        </form>
        @if (qosError()) {
          <div class="alert alert-danger alert-sm" role="alert"><div class="alert-items"><div class="alert-item static"><div class="alert-text">{{ qosError() }}</div></div></div></div>
        }
      </div>
      <div class="modal-footer">
        <button type="button" class="btn btn-outline" (click)="editingQoS = false">Cancel</button>
        <button type="button" class="btn btn-primary" (click)="saveQoS()" [disabled]="busy()">Apply</button>
      </div>
    </clr-modal>

    <clr-modal [(clrModalOpen)]="editingHosts" [clrModalSize]="'md'" [clrModalClosable]="!hostsRunning()">
      <h3 class="modal-title">{{ hostsMode === 'map' ? 'Map' : 'Unmap' }} {{ hostsVolume?.name }}</h3>
      <div class="modal-body">
        @if (hostsMode === 'map') {
          <p>The hosts you choose get the volume's LUN, rescan their iSCSI adapter and mount its datastore.</p>
        } @else {
          <p>On each host you choose, the datastore is unmounted and the LUN detached, then the volume is unmapped and the host rescans. Virtual machines registered on those hosts must be moved off the datastore first.</p>
        }
        <form clrForm aria-label="Hosts of the volume" (ngSubmit)="applyHosts()">
          <fieldset class="hosts">
            <legend>{{ hostsMode === 'map' ? 'Hosts to map it to' : 'Hosts to unmap it from' }}</legend>
            @for (h of hostsSystem?.hosts ?? []; track h) {
              <clr-checkbox-wrapper>
                <input type="checkbox" clrCheckbox [id]="'mh-' + h" [name]="'mh-' + h" [checked]="hostsChosen.has(h)" [disabled]="!hostChoosable(h) || hostsJob() !== null" (change)="chooseHost(h, $any($event.target).checked)" />
                <label [for]="'mh-' + h">{{ h }}{{ hostNote(h) }}</label>
              </clr-checkbox-wrapper>
            }
          </fieldset>
          @if (hostsMode === 'map') {
            <clr-radio-container clrInline>
              <label>Access</label>
              <clr-radio-wrapper>
                <input type="radio" clrRadio id="access-rw" name="access" value="read_write" [(ngModel)]="access" />
                <label for="access-rw">Read-write</label>
              </clr-radio-wrapper>
              <clr-radio-wrapper>
                <input type="radio" clrRadio id="access-ro" name="access" value="read_only" [(ngModel)]="access" />
                <label for="access-ro">Read-only (no datastore: VMFS needs to write)</label>
              </clr-radio-wrapper>
            </clr-radio-container>
          }
        </form>
        <ng-container *ngTemplateOutlet="jobView; context: { job: hostsJob(), error: hostsError() }"></ng-container>
      </div>
      <div class="modal-footer">
        <button type="button" class="btn btn-outline" (click)="editingHosts = false" [disabled]="hostsRunning()">{{ hostsJob() ? 'Close' : 'Cancel' }}</button>
        @if (!hostsJob() || hostsJob()?.state === 'failed') {
          <button type="button" class="btn btn-primary" (click)="applyHosts()" [disabled]="busy() || hostsChosen.size === 0">{{ hostsJob() ? 'Run again' : hostsMode === 'map' ? 'Map' : 'Unmap' }}</button>
        }
      </div>
    </clr-modal>

    <clr-modal [(clrModalOpen)]="deleting" [clrModalSize]="'md'" [clrModalClosable]="!deleteRunning()">
      <h3 class="modal-title">Delete {{ deleteVolumeOf?.name }}</h3>
      <div class="modal-body">
        <p>This destroys the volume's data; it cannot be undone. The plugin will:</p>
        <ul class="steps">
          <li>refuse, changing nothing, while virtual machines or templates have files on datastore {{ deleteVolumeOf?.name }};</li>
          <li>unmount the datastore on {{ hostCount(deleteSystem?.hosts?.length ?? 0) }} and detach its LUN there;</li>
          <li>unmap the volume from {{ hostCount(deleteVolumeOf?.mappings?.length ?? 0) }} in Cairn and delete it with its {{ deleteVolumeOf ? size(deleteVolumeOf.size) : '' }};</li>
          <li>rescan every host so none keeps a dead device.</li>
        </ul>
        <form clrForm aria-label="Confirm delete" (ngSubmit)="deleteVolume()">
          <clr-input-container>
            <label for="delete-confirm">Type {{ deleteVolumeOf?.name }} to confirm</label>
            <input clrInput id="delete-confirm" name="confirm" autocomplete="off" [(ngModel)]="deleteTyped" [disabled]="deleteJob() !== null" />
          </clr-input-container>
        </form>
        <ng-container *ngTemplateOutlet="jobView; context: { job: deleteJob(), error: deleteError() }"></ng-container>
      </div>
      <div class="modal-footer">
        <button type="button" class="btn btn-outline" (click)="deleting = false" [disabled]="deleteRunning()">{{ deleteJob() ? 'Close' : 'Cancel' }}</button>
        @if (!deleteJob() || deleteJob()?.state === 'failed') {
          <button type="button" class="btn btn-danger" (click)="deleteVolume()" [disabled]="busy() || deleteTyped !== deleteVolumeOf?.name">{{ deleteJob() ? 'Run again' : 'Delete volume and data' }}</button>
        }
      </div>
    </clr-modal>

    <ng-template #jobView let-job="job" let-error="error">
      @if (error) {
        <div class="alert alert-danger alert-sm" role="alert"><div class="alert-items"><div class="alert-item static"><div class="alert-text">{{ error }}</div></div></div></div>
      }
      @if (job?.state === 'failed') {
        <div class="alert alert-danger alert-sm" role="alert"><div class="alert-items"><div class="alert-item static"><div class="alert-text"><cairn-message [text]="job.error" /> Steps already done are skipped when you run it again.</div></div></div></div>
      }
      @if (job?.state === 'succeeded') {
        <div class="alert alert-success alert-sm" role="status"><div class="alert-items"><div class="alert-item static"><div class="alert-text">Done: every step succeeded.</div></div></div></div>
      }
      @if (job) {
        <p class="job-state">Job {{ job.name }}: <span class="label" [class.label-info]="job.state === 'running'" [class.label-success]="job.state === 'succeeded'" [class.label-danger]="job.state === 'failed'">{{ job.state }}</span></p>
        <div class="cairn-log dialog-log" role="log" [attr.aria-label]="'Progress of ' + job.name" tabindex="0">
          @for (e of eventsOf(job.name); track e.seq) {
            <div [class]="e.level">{{ e.host ? '[' + e.host + ']' : '' }} {{ e.message }}</div>
          }
        </div>
      }
    </ng-template>
  `,
  styles: `
    .job-card { margin-top: 1rem; }
    .hosts { border: 0; padding: 0; margin-top: 0.6rem; }
    .cell-action { margin: 0 0 0 0.4rem; min-width: 0; padding: 0; height: auto; line-height: inherit; }
    .error-text { color: var(--cds-alias-status-danger, #c21d00); }
    .steps { margin: 0 0 0.6rem 1.2rem; }
    .job-state { margin-top: 0.6rem; }
    .dialog-log { max-height: 12rem; overflow: auto; }
  `,
})
export class VolumesComponent implements OnInit, OnDestroy {
  readonly store = inject(StoreService);
  private api = inject(ApiService);
  private stop: (() => void) | null = null;
  readonly deployed = computed(() => (this.store.systems() ?? []).filter((s) => s.deploy.completed));
  readonly jobName = signal<string | null>(null);
  readonly job = computed<Job | undefined>(() => {
    const n = this.jobName();
    return n ? this.store.jobs().find((j) => j.name === n) : undefined;
  });
  readonly jobEvents = computed(() => this.store.events().filter((e) => e.job === this.jobName()));
  readonly formError = signal<string | null>(null);
  readonly busy = signal(false);
  creating = false;
  target: SystemView | null = null;
  name = '';
  sizeGiB = 64;
  thin = true;
  hosts = new Set<string>();
  growing = false;
  growSystem: SystemView | null = null;
  growVolumeOf: Volume | null = null;
  growGiB = 0;
  readonly growError = signal<string | null>(null);
  editingQoS = false;
  qosSystem: SystemView | null = null;
  qosVolume: Volume | null = null;
  iopsLimit: number | null = null;
  bandwidthMiB: number | null = null;
  readonly qosError = signal<string | null>(null);

  ngOnInit(): void {
    this.stop = this.store.watch(2000);
  }

  ngOnDestroy(): void {
    this.stop?.();
  }

  size(n: number): string {
    return bytes(n);
  }

  limits(v: Volume): string {
    const own = qosLimits(v.iops_limit, v.bandwidth_limit);
    const eff = qosLimits(v.effective_iops_limit, v.effective_bandwidth_limit);
    return own === eff ? own : `${eff} (pool rule)`;
  }

  openGrow(s: SystemView, v: Volume): void {
    this.growSystem = s;
    this.growVolumeOf = v;
    this.growGiB = Math.ceil(v.size / 2 ** 30) * 2;
    this.growError.set(null);
    this.growing = true;
  }

  async grow(): Promise<void> {
    if (!this.growSystem || !this.growVolumeOf) {
      return;
    }
    const now = this.growVolumeOf.size / 2 ** 30;
    if (!Number.isInteger(this.growGiB) || this.growGiB <= now) {
      this.growError.set(`Give a whole number of GiB larger than the volume's ${now} GiB: volumes only grow.`);
      return;
    }
    this.busy.set(true);
    this.growError.set(null);
    try {
      const j = await this.api.growVolume(this.growSystem.name, this.growVolumeOf.name, this.growGiB);
      this.jobName.set(j.name);
      this.growing = false;
      await this.store.refresh();
    } catch (e) {
      this.growError.set(e instanceof ApiError ? e.message : String(e));
    } finally {
      this.busy.set(false);
    }
  }

  openQoS(s: SystemView, v: Volume): void {
    this.qosSystem = s;
    this.qosVolume = v;
    this.iopsLimit = v.iops_limit || null;
    this.bandwidthMiB = v.bandwidth_limit ? v.bandwidth_limit / MiB : null;
    this.qosError.set(null);
    this.editingQoS = true;
  }

  async saveQoS(): Promise<void> {
    if (!this.qosSystem || !this.qosVolume) {
      return;
    }
    const qos = qosRequest(this.iopsLimit, this.bandwidthMiB);
    if (typeof qos === 'string') {
      this.qosError.set(qos);
      return;
    }
    this.busy.set(true);
    this.qosError.set(null);
    try {
      await this.api.setVolumeQoS(this.qosSystem.name, this.qosVolume.name, qos);
      this.editingQoS = false;
      await this.store.refresh();
    } catch (e) {
      this.qosError.set(e instanceof ApiError ? e.message : String(e));
    } finally {
      this.busy.set(false);
    }
  }

  openCreate(s: SystemView): void {
    this.target = s;
    this.name = '';
    this.sizeGiB = 64;
    this.thin = true;
    this.hosts = new Set(s.hosts ?? []);
    this.formError.set(null);
    this.creating = true;
  }

  toggle(h: string, on: boolean): void {
    if (on) {
      this.hosts.add(h);
    } else {
      this.hosts.delete(h);
    }
  }

  async create(): Promise<void> {
    if (!this.target) {
      return;
    }
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(this.name)) {
      this.formError.set('Give the volume a name: letters, digits, dot, dash or underscore, up to 64.');
      return;
    }
    if (!(this.sizeGiB >= 1)) {
      this.formError.set('Give a size of at least 1 GiB.');
      return;
    }
    if (this.hosts.size === 0) {
      this.formError.set('Choose at least one host to mount the datastore.');
      return;
    }
    this.busy.set(true);
    this.formError.set(null);
    try {
      const j = await this.api.createVolume({
        system: this.target.name,
        volume: this.name,
        size_gib: this.sizeGiB,
        thin: this.thin,
        hosts: [...this.hosts],
      });
      this.jobName.set(j.name);
      this.creating = false;
      await this.store.refresh();
    } catch (e) {
      this.formError.set(e instanceof ApiError ? e.message : String(e));
    } finally {
      this.busy.set(false);
    }
  }

  // Map / unmap dialog.
  editingHosts = false;
  hostsMode: 'map' | 'unmap' = 'map';
  hostsSystem: SystemView | null = null;
  hostsVolume: Volume | null = null;
  hostsChosen = new Set<string>();
  access: VolumeAccess = 'read_write';
  readonly hostsJobName = signal<string | null>(null);
  readonly hostsJob = computed<Job | null>(() => this.jobNamed(this.hostsJobName()));
  readonly hostsRunning = computed(() => this.hostsJob()?.state === 'running');
  readonly hostsError = signal<string | null>(null);
  // Delete dialog.
  deleting = false;
  deleteSystem: SystemView | null = null;
  deleteVolumeOf: Volume | null = null;
  deleteTyped = '';
  readonly deleteJobName = signal<string | null>(null);
  readonly deleteJob = computed<Job | null>(() => this.jobNamed(this.deleteJobName()));
  readonly deleteRunning = computed(() => this.deleteJob()?.state === 'running');
  readonly deleteError = signal<string | null>(null);

  private jobNamed(name: string | null): Job | null {
    return name ? (this.store.jobs().find((j) => j.name === name) ?? null) : null;
  }

  eventsOf(job: string) {
    return this.store.events().filter((e) => e.job === job);
  }

  hostCount(n: number): string {
    return n === 1 ? '1 host' : `${n} hosts`;
  }

  // mappedHosts: host name -> mapping, for the volume's mappings.
  private mappedHosts(v: Volume | null): Map<string, { read_only?: boolean }> {
    const m = new Map<string, { read_only?: boolean }>();
    for (const x of v?.mappings ?? []) {
      m.set(x.host_name ?? x.host_id, x);
    }
    return m;
  }

  mappedTo(v: Volume): string {
    const names = [...this.mappedHosts(v).entries()].map(([h, m]) => (m.read_only ? `${h} (read-only)` : h));
    return names.length ? names.join(', ') : 'no host';
  }

  openHosts(s: SystemView, v: Volume, mode: 'map' | 'unmap'): void {
    this.hostsSystem = s;
    this.hostsVolume = v;
    this.hostsMode = mode;
    this.hostsChosen = new Set();
    this.access = 'read_write';
    this.hostsJobName.set(null);
    this.hostsError.set(null);
    this.editingHosts = true;
  }

  // hostChoosable: map offers the hosts not mapped yet, unmap the mapped.
  hostChoosable(h: string): boolean {
    const mapped = this.mappedHosts(this.hostsVolume).has(h);
    return this.hostsMode === 'map' ? !mapped : mapped;
  }

  hostNote(h: string): string {
    const m = this.mappedHosts(this.hostsVolume).get(h);
    if (!m) {
      return this.hostsMode === 'unmap' ? ' (not mapped)' : '';
    }
    return m.read_only ? ' (mapped read-only)' : ' (mapped)';
  }

  chooseHost(h: string, on: boolean): void {
    if (on) {
      this.hostsChosen.add(h);
    } else {
      this.hostsChosen.delete(h);
    }
    this.hostsError.set(null);
  }

  async applyHosts(): Promise<void> {
    if (!this.hostsSystem || !this.hostsVolume) {
      return;
    }
    if (this.hostsChosen.size === 0) {
      this.hostsError.set(`Choose at least one host to ${this.hostsMode === 'map' ? 'map the volume to' : 'unmap the volume from'}.`);
      return;
    }
    this.busy.set(true);
    this.hostsError.set(null);
    try {
      const hosts = [...this.hostsChosen];
      const j =
        this.hostsMode === 'map'
          ? await this.api.mapVolume(this.hostsSystem.name, this.hostsVolume.name, hosts, this.access)
          : await this.api.unmapVolume(this.hostsSystem.name, this.hostsVolume.name, hosts);
      this.hostsJobName.set(j.name);
      await this.store.refresh();
    } catch (e) {
      this.hostsError.set(e instanceof ApiError ? e.message : String(e));
    } finally {
      this.busy.set(false);
    }
  }

  openDelete(s: SystemView, v: Volume): void {
    this.deleteSystem = s;
    this.deleteVolumeOf = v;
    this.deleteTyped = '';
    this.deleteJobName.set(null);
    this.deleteError.set(null);
    this.deleting = true;
  }

  async deleteVolume(): Promise<void> {
    if (!this.deleteSystem || !this.deleteVolumeOf) {
      return;
    }
    if (this.deleteTyped !== this.deleteVolumeOf.name) {
      this.deleteError.set(`Type the volume's name, ${this.deleteVolumeOf.name}, exactly to confirm: its data will be destroyed.`);
      return;
    }
    this.busy.set(true);
    this.deleteError.set(null);
    try {
      const j = await this.api.deleteVolume(this.deleteSystem.name, this.deleteVolumeOf.name, this.deleteTyped);
      this.deleteJobName.set(j.name);
      await this.store.refresh();
    } catch (e) {
      this.deleteError.set(e instanceof ApiError ? e.message : String(e));
    } finally {
      this.busy.set(false);
    }
  }
}

// qosRequest turns the form's fields into the API's change (both fields
// sent, an empty one as 0: unlimited), or says what is wrong in the form's
// units. The gateway checks the upper bounds and says why it refuses.
export function qosRequest(iops: number | null | undefined, bandwidthMiB: number | null | undefined): VolumeQoS | string {
  const i = iops ?? 0;
  const b = bandwidthMiB ?? 0;
  if (!Number.isInteger(i) || i < 0) {
    return 'IOPS limit: give a whole number of I/Os per second, or leave it empty for no limit.';
  }
  if (!Number.isFinite(b) || b < 0) {
    return 'Bandwidth limit: give MiB per second, or leave it empty for no limit.';
  }
  const bytesPerSecond = Math.round(b * MiB);
  if (bytesPerSecond !== 0 && bytesPerSecond < 64 * 1024) {
    return 'Bandwidth limit: at least 0.0625 MiB/s (64 KiB/s); below that one request per second would stall the hosts.';
  }
  return { iops_limit: i, bandwidth_limit: bytesPerSecond };
}
