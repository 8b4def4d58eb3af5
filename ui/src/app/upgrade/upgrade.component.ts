import { Component, OnDestroy, OnInit, computed, effect, inject, signal, untracked } from '@angular/core';
import { DatePipe } from '@angular/common';
import { FormsModule } from '@angular/forms';
import { ClarityModule } from '@clr/angular';
import { ApiError, ApiService } from '../core/api.service';
import { bytes } from '../core/format';
import { StoreService } from '../core/store.service';
import { Bundle, Job, UpgradeSVM } from '../core/types';
import { compareVersions, rollProgress, stateLabel } from './progress';
import { MessageComponent } from '../shared/message.component';

// MAX_BUNDLE is the gateway's bound on an update bundle (256 MiB).
const MAX_BUNDLE = 256 * 1024 * 1024;

// UpgradeComponent: roll a deployed system's SVMs to a bundle stored on
// its gateway (the plugin server's rolling upgrade, job upgrade:SYSTEM),
// with each SVM's updater as the gateway reports it, the roll's unit and
// step from the job's events, and a stop that ends the roll between units.
@Component({
  selector: 'cairn-upgrade',
  imports: [ClarityModule, FormsModule, DatePipe, MessageComponent],
  template: `
    <div class="cairn-page">
      <h1 cds-text="title">Upgrade</h1>
      <p>
        Roll a system's SVMs to a Cairn version stored on its gateway (<strong>Upload a bundle</strong> below stores one):
        one fault set at a time, its SDSs in instant maintenance, the MDM members last.
      </p>
      @if (store.error(); as err) {
        <clr-alert clrAlertType="danger" [clrAlertClosable]="false"><clr-alert-item><span class="alert-text"><cairn-message [text]="err" /></span></clr-alert-item></clr-alert>
      }
      @if (deployed().length) {
        <form clrForm clrLayout="horizontal" aria-label="System to upgrade">
          <clr-select-container>
            <label for="upgrade-system">System</label>
            <select clrSelect id="upgrade-system" name="system" [ngModel]="system()" (ngModelChange)="pick.set($event)">
              @for (s of deployed(); track s.name) {
                <option [value]="s.name">{{ s.name }}</option>
              }
            </select>
          </clr-select-container>
        </form>
      } @else if (store.systems() !== null) {
        <p>No deployed system: deploy one first (Deploy page).</p>
      }

      @if (system(); as sys) {
        @if (readError()) {
          <clr-alert clrAlertType="danger" [clrAlertClosable]="false"><clr-alert-item><span class="alert-text">{{ readError() }}</span></clr-alert-item></clr-alert>
        }

        @if (job(); as j) {
          <section class="roll" aria-label="Upgrade job">
            <h3>Upgrade {{ progress().version ? 'to ' + progress().version : '' }}</h3>
            <p class="roll-state">
              Job upgrade:{{ sys }}:
              <span class="label" [class.label-info]="j.state === 'running'" [class.label-success]="j.state === 'succeeded'" [class.label-danger]="j.state === 'failed' || j.state === 'interrupted'" [class.label-warning]="j.state === 'stopped'">{{ j.state }}</span>
              <span class="cairn-muted">started {{ j.started | date: 'HH:mm:ss' }}{{ j.ended ? ', ended ' + (j.ended | date: 'HH:mm:ss') : '' }}</span>
            </p>
            @if (j.state === 'running') {
              @if (progress().units) {
                <p class="roll-unit">
                  <strong>SVM unit {{ progress().unit }} of {{ progress().units }}:</strong> {{ progress().svms }}
                </p>
                <clr-progress-bar [clrValue]="percent()" clrMax="100" [attr.aria-label]="'Unit ' + progress().unit + ' of ' + progress().units"></clr-progress-bar>
                <p class="roll-step">{{ progress().step || 'starting…' }}</p>
              } @else {
                <clr-progress-bar clrLoop aria-label="Upgrade starting"></clr-progress-bar>
                <p class="roll-step">Checking the bundle, the updaters and the cluster's health…</p>
              }
              <div class="actions">
                <button type="button" class="btn btn-warning-outline" (click)="stop(sys)" [disabled]="stopAsked()"
                  title="The roll ends once the SVM (or fault set) it is on is upgraded, out of maintenance and resynced">
                  {{ stopAsked() ? 'Stopping after this SVM…' : 'Stop after this SVM' }}
                </button>
              </div>
            } @else {
              <div class="alert alert-sm" [class.alert-success]="j.state === 'succeeded'" [class.alert-warning]="j.state === 'stopped'" [class.alert-danger]="j.state === 'failed' || j.state === 'interrupted'" role="status">
                <div class="alert-items"><div class="alert-item static"><div class="alert-text">
                  @switch (j.state) {
                    @case ('succeeded') {
                      Upgrade to {{ progress().version || 'the new version' }} done: every SVM it rolled runs it, out of maintenance and resynced. Nothing more to do.
                    }
                    @case ('stopped') {
                      @if (stopped(j); as st) {
                        Stopped as asked after {{ st.done }} of {{ st.units }} SVM units: no SDS is in maintenance. Not upgraded yet: {{ st.left }}.
                      } @else {
                        Stopped as asked, between two SVM units: no SDS is in maintenance. <cairn-message [text]="j.error" />
                      }
                      <br />To go on, choose <strong>Upgrade to {{ progress().version || 'the same version' }}</strong> again: the SVMs already on it are skipped.
                    }
                    @case ('interrupted') {
                      <cairn-message [text]="j.error" /> Choose <strong>Upgrade to {{ progress().version || 'the same version' }}</strong> again to resume.
                    }
                    @default {
                      The upgrade failed: <cairn-message [text]="j.error" />
                      <br />Do what the error says, then choose <strong>Upgrade to {{ progress().version || 'the same version' }}</strong> again: the roll resumes, the SVMs already on it are skipped.
                    }
                  }
                </div></div></div>
              </div>
            }
          </section>
        }
        @if (msg()) {
          <div class="alert alert-sm" [class.alert-danger]="msgErr()" [class.alert-info]="!msgErr()" [attr.role]="msgErr() ? 'alert' : 'status'"><div class="alert-items"><div class="alert-item static"><div class="alert-text">{{ msg() }}</div></div></div></div>
        }

        <h3>SVMs</h3>
        <p class="cairn-muted choose-hint">
          Choose hosts to upgrade only their SVMs (the hosts patched this week, say); with none chosen, an upgrade rolls every SVM.
        </p>
        <clr-datagrid aria-label="SVM updaters" class="svms">
          <clr-dg-column>Host</clr-dg-column>
          <clr-dg-column>SVM</clr-dg-column>
          <clr-dg-column>Running</clr-dg-column>
          <clr-dg-column>Ordered</clr-dg-column>
          <clr-dg-column>Updater</clr-dg-column>
          <clr-dg-column>Message</clr-dg-column>
          <clr-dg-row *clrDgItems="let u of svms(); trackBy: byName" [clrDgItem]="u">
            <clr-dg-cell>
              @if (u.host; as h) {
                <clr-checkbox-wrapper>
                  <input type="checkbox" clrCheckbox [id]="'up-' + u.name" [checked]="chosen().includes(h)" [disabled]="running()" (change)="choose(h, $any($event.target).checked)" />
                  <label [for]="'up-' + u.name">{{ h }}</label>
                </clr-checkbox-wrapper>
              } @else {
                <span class="cairn-muted" title="The system's plan has no host for this SVM: an upgrade cannot order it">not in the plan</span>
              }
            </clr-dg-cell>
            <clr-dg-cell>{{ u.name }}</clr-dg-cell>
            <clr-dg-cell><strong>{{ u.running || '—' }}</strong></clr-dg-cell>
            <clr-dg-cell>{{ u.ordered || '—' }}</clr-dg-cell>
            <clr-dg-cell><span [class]="'label ' + label(u.state)">{{ u.state }}</span></clr-dg-cell>
            <clr-dg-cell class="message">{{ u.message || '' }}</clr-dg-cell>
          </clr-dg-row>
          <clr-dg-placeholder>{{ svmsRead() ? 'No SVM updater has reported to the gateway yet.' : 'Reading the SVMs’ updaters…' }}</clr-dg-placeholder>
          <clr-dg-footer>{{ versions() }}</clr-dg-footer>
        </clr-datagrid>

        <h3>Stored bundles</h3>
        <div class="upload">
          <input #bundleFile type="file" id="bundle-file" class="file" accept=".tgz,.tar.gz,application/gzip" aria-label="Update bundle file" (change)="upload(sys, bundleFile)" />
          <button type="button" class="btn btn-outline btn-sm" (click)="bundleFile.click()" [disabled]="uploading() !== null">Upload a bundle…</button>
          <span class="cairn-muted">the file <code>cairn bundle --bin DIR --out FILE</code> writes, up to 256 MiB; the gateway checks it before it stores it</span>
        </div>
        @if (uploading(); as u) {
          <div class="upload-progress" role="status">
            <clr-progress-bar [clrValue]="u.total ? (u.sent * 100) / u.total : 0" clrMax="100" aria-label="Bundle upload"></clr-progress-bar>
            <p>{{ u.sent < u.total ? 'Uploading ' + u.name + ': ' + size(u.sent) + ' of ' + size(u.total) + '…' : 'Uploaded ' + u.name + '; the gateway checks it…' }}</p>
          </div>
        }
        @if (uploadMsg(); as um) {
          <div class="alert alert-sm upload-result" [class.alert-danger]="um.err" [class.alert-success]="!um.err" [attr.role]="um.err ? 'alert' : 'status'">
            <div class="alert-items"><div class="alert-item static"><div class="alert-text">{{ um.text }}</div></div></div>
          </div>
        }
        <clr-datagrid aria-label="Stored bundles" class="bundles">
          <clr-dg-column>Version</clr-dg-column>
          <clr-dg-column>Size</clr-dg-column>
          <clr-dg-column>SHA-256</clr-dg-column>
          <clr-dg-column>Action</clr-dg-column>
          <clr-dg-row *clrDgItems="let b of bundles(); trackBy: byVersion" [clrDgItem]="b">
            <clr-dg-cell><strong>{{ b.version }}</strong></clr-dg-cell>
            <clr-dg-cell>{{ size(b.size) }}</clr-dg-cell>
            <clr-dg-cell><code [title]="b.sha256">{{ b.sha256 ? b.sha256.slice(0, 16) + '…' : '—' }}</code></clr-dg-cell>
            <clr-dg-cell>
              @if (toDo(b) === 0) {
                <span class="cairn-muted">{{ chosen().length ? 'every chosen SVM runs it' : 'every SVM runs it' }}</span>
              } @else if (older(b)) {
                <span class="cairn-muted">older than {{ newest() }}, which SVMs run</span>
              } @else {
                <button type="button" class="btn btn-primary btn-sm" (click)="ask(b)" [disabled]="running()">Upgrade to {{ b.version }}…</button>
              }
            </clr-dg-cell>
          </clr-dg-row>
          <clr-dg-placeholder>No bundle stored: upload one (<strong>Upload a bundle…</strong> above, or <code>cairnctl upgrade upload FILE</code>).</clr-dg-placeholder>
        </clr-datagrid>
        <p class="cairn-muted">
          An updater that fails or rolls back stops the roll: its SDSs leave maintenance, the SVMs upgraded before it stay on the new version.
          <strong>Stop after this SVM</strong> ends the roll between two units; starting the same upgrade again goes on where it stopped.
        </p>
      }
    </div>

    <clr-modal [(clrModalOpen)]="asking" [clrModalSize]="'md'">
      <h3 class="modal-title">Upgrade system {{ system() }} to {{ asked?.version }}?</h3>
      <div class="modal-body">
        @if (chosen().length) {
          <p>{{ chosenSummary() }}, one unit at a time:</p>
        } @else {
          <p>{{ askedToDo() }} of {{ svms().length }} SVMs will be upgraded, one unit at a time:</p>
        }
        <ol>
          <li>One <strong>fault set</strong> at a time (a host without a fault set alone): its SDSs enter <strong>instant maintenance</strong>, each SVM downloads and installs {{ asked?.version }} and restarts on it, the SDSs leave maintenance and the data resyncs before the next unit.</li>
          <li>The <strong>MDM members</strong> (and tie-breaker) last, one at a time, so the MDM keeps its quorum.</li>
          <li>An SVM whose updater fails or <strong>rolls back</strong> stops the roll: its SDSs leave maintenance; the SVMs done stay on {{ asked?.version }}.</li>
        </ol>
        <p>Volumes stay online: the other fault sets hold every copy while one is away. You can stop the roll after the SVM it is on.</p>
        @if (askError()) {
          <div class="alert alert-danger alert-sm" role="alert"><div class="alert-items"><div class="alert-item static"><div class="alert-text">{{ askError() }}</div></div></div></div>
        }
      </div>
      <div class="modal-footer">
        <button type="button" class="btn btn-outline" (click)="asking = false">Cancel</button>
        <button type="button" class="btn btn-primary" (click)="start()" [disabled]="starting()">Upgrade to {{ asked?.version }}</button>
      </div>
    </clr-modal>
  `,
  styles: `
    .roll { margin-top: 0.6rem; }
    .roll-step { margin-top: 0.3rem; }
    .actions { margin: 0.6rem 0; }
    .message { white-space: normal; }
    .choose-hint { margin-top: 0.3rem; }
    clr-checkbox-wrapper { margin: 0; }
    .upload { display: flex; align-items: baseline; gap: 0.6rem; margin: 0.3rem 0 0.2rem; }
    .upload .btn { margin: 0; }
    .file { display: none; }
    .upload-progress { max-width: 36rem; }
    .upload-progress p { margin-top: 0.2rem; }
    .upload-result { margin: 0.3rem 0; max-width: 60rem; }
  `,
})
export class UpgradeComponent implements OnInit, OnDestroy {
  readonly store = inject(StoreService);
  private api = inject(ApiService);
  private unwatch: (() => void) | null = null;
  private timer: ReturnType<typeof setInterval> | null = null;
  private reads = 0;

  readonly deployed = computed(() => (this.store.systems() ?? []).filter((s) => s.deploy.completed));
  readonly pick = signal('');
  // system is the one picked, else the first deployed.
  readonly system = computed(() => {
    const names = this.deployed().map((s) => s.name);
    return names.includes(this.pick()) ? this.pick() : (names[0] ?? '');
  });
  readonly svms = signal<UpgradeSVM[]>([]);
  readonly svmsRead = signal(false);
  // chosen: the hosts whose SVMs an upgrade rolls (none: every SVM).
  readonly chosen = signal<string[]>([]);
  readonly scope = computed(() => {
    const c = this.chosen();
    return c.length ? this.svms().filter((u) => u.host && c.includes(u.host)) : this.svms();
  });
  readonly bundles = signal<Bundle[]>([]);
  readonly readError = signal<string | null>(null);
  readonly msg = signal<string | null>(null);
  readonly msgErr = signal(false);
  readonly stopAsked = signal(false);
  // uploading: the bundle file on its way to the gateway, if any.
  readonly uploading = signal<{ name: string; sent: number; total: number } | null>(null);
  // uploadMsg: how the last upload ended.
  readonly uploadMsg = signal<{ text: string; err: boolean } | null>(null);
  readonly starting = signal(false);
  readonly askError = signal<string | null>(null);
  asking = false;
  asked: Bundle | null = null;

  readonly job = computed<Job | undefined>(() => this.store.job('upgrade:' + this.system()));
  readonly running = computed(() => this.job()?.state === 'running');
  // The events of the job's latest run (none before its start: the run
  // before, to another version, may have ended the same second), oldest
  // first.
  readonly progress = computed(() => {
    const j = this.job();
    if (!j) {
      return rollProgress([]);
    }
    const since = Date.parse(j.started);
    return rollProgress(this.store.events().filter((e) => e.job === j.name && Date.parse(e.time) >= since));
  });
  readonly percent = computed(() => {
    const p = this.progress();
    // The unit on counts half done, so that unit 1 of n shows it started.
    return p.units ? Math.round(((p.unit - 0.5) / p.units) * 100) : 0;
  });

  constructor() {
    // A new system picked: its lists, read afresh.
    effect(() => {
      const sys = this.system();
      this.svms.set([]);
      this.svmsRead.set(false);
      this.chosen.set([]);
      this.bundles.set([]);
      this.readError.set(null);
      this.msg.set(null);
      this.stopAsked.set(false);
      this.uploadMsg.set(null);
      if (sys) {
        void this.read(sys, true);
      }
    });
    // The job ended: its end state says it all; a note from starting or
    // stopping it is over (an error stays until the next action).
    effect(() => {
      if (!this.running()) {
        this.stopAsked.set(false);
        if (!untracked(this.msgErr)) {
          this.msg.set(null);
        }
      }
    });
  }

  ngOnInit(): void {
    this.unwatch = this.store.watch(1500);
    // The updaters every second while a roll runs (their states move in
    // seconds), every 3 s else; the bundles, which change rarely, every 10 s.
    this.timer = setInterval(() => {
      const sys = this.system();
      const tick = ++this.reads;
      if (sys && (this.running() || tick % 3 === 0)) {
        void this.read(sys, tick % 10 === 0);
      }
    }, 1000);
  }

  ngOnDestroy(): void {
    this.unwatch?.();
    if (this.timer) {
      clearInterval(this.timer);
    }
  }

  private async read(sys: string, withBundles: boolean): Promise<void> {
    try {
      const [u, b] = await Promise.all([this.api.upgradeSVMs(sys), withBundles ? this.api.upgradeBundles(sys) : Promise.resolve(null)]);
      if (sys !== this.system()) {
        return; // another system was picked meanwhile
      }
      this.svms.set(u.svms);
      this.svmsRead.set(true);
      if (b) {
        this.bundles.set(b.bundles);
      }
      this.readError.set(null);
    } catch (e) {
      this.readError.set(e instanceof ApiError ? e.message : String(e));
    }
  }

  // upload sends the file chosen in input to the system's gateway, which
  // checks it (format, version, digests) before it stores it. A file over
  // the gateway's bound is refused here, before a byte is sent.
  async upload(sys: string, input: HTMLInputElement): Promise<void> {
    const file = input.files?.[0];
    input.value = ''; // the same file chosen again is a new choice
    if (!file) {
      return;
    }
    this.uploadMsg.set(null);
    if (file.size > MAX_BUNDLE) {
      this.say(`${file.name} is ${bytes(file.size)}: the gateway takes update bundles up to 256 MiB. Choose the file cairn bundle wrote.`, true);
      return;
    }
    this.uploading.set({ name: file.name, sent: 0, total: file.size });
    try {
      const r = await this.api.uploadBundle(sys, file, (sent, total) => this.uploading.set({ name: file.name, sent, total }));
      const b = r.bundle;
      this.say(`Bundle ${b.version} stored on the gateway of ${sys} (${bytes(b.size)}, SHA-256 ${b.sha256.slice(0, 16)}…): an upgrade can roll to it.`, false);
      if (sys === this.system()) {
        await this.read(sys, true);
      }
    } catch (e) {
      this.say(`${file.name} was not stored: ${e instanceof ApiError ? e.message : String(e)}`, true);
    } finally {
      this.uploading.set(null);
    }
  }

  private say(text: string, err: boolean): void {
    this.uploadMsg.set({ text, err });
  }

  byName = (_: number, u: UpgradeSVM) => u.name;
  byVersion = (_: number, b: Bundle) => b.version;
  label = stateLabel;
  size = bytes;

  // toDo counts the SVMs an upgrade to b would roll: those chosen (or all)
  // not running b's version yet (-1 while none is known).
  toDo(b: Bundle): number {
    if (!this.svmsRead() || !this.svms().length) {
      return -1;
    }
    return this.scope().filter((u) => u.running !== b.version).length;
  }

  choose(host: string, on: boolean): void {
    this.chosen.update((c) => (on ? [...c.filter((h) => h !== host), host] : c.filter((h) => h !== host)));
  }

  // newest is the highest version an SVM runs.
  newest(): string {
    return this.svms().reduce((a, u) => (compareVersions(u.running, a) > 0 ? u.running : a), '');
  }

  // older: b is older than what some SVM runs (the roll would downgrade it).
  older(b: Bundle): boolean {
    return compareVersions(b.version, this.newest()) < 0;
  }

  // stopped reads the engine's stop error: "... after 1 of 4 SVM units
  // (...): send the same upgrade request to go on with A, B".
  stopped(j: Job): { done: number; units: number; left: string } | null {
    const m = /after (\d+) of (\d+) SVM units.*go on with (.+)$/.exec(j.error ?? '');
    return m ? { done: Number(m[1]), units: Number(m[2]), left: m[3] } : null;
  }

  askedToDo(): number {
    return this.asked ? Math.max(this.toDo(this.asked), 0) : 0;
  }

  // chosenSummary says what an upgrade of the chosen hosts' SVMs does:
  // "The chosen SVM will be upgraded (host esx-04; the other 3 SVMs stay on
  // their version)", "2 of the 3 chosen SVMs will be upgraded (hosts ...)".
  chosenSummary(): string {
    const n = this.askedToDo();
    const m = this.scope().length;
    const rest = this.svms().length - m;
    const who = m === 1 ? 'The chosen SVM' : n === m ? `All ${m} chosen SVMs` : `${n} of the ${m} chosen SVMs`;
    const hosts = this.chosen().length === 1 ? `host ${this.chosen()[0]}` : `hosts ${this.chosen().join(', ')}`;
    const others = rest === 0 ? 'every SVM of the system' : rest === 1 ? 'the other SVM stays on its version' : `the other ${rest} SVMs stay on their version`;
    return `${who} will be upgraded (${hosts}; ${others})`;
  }


  // versions sums up what the SVMs run: "4 SVMs: 2 on 0.2.0, 2 on 0.1.0".
  versions(): string {
    const by = new Map<string, number>();
    for (const u of this.svms()) {
      by.set(u.running || 'unknown', (by.get(u.running || 'unknown') ?? 0) + 1);
    }
    const n = this.svms().length;
    const parts = [...by.entries()].sort((a, b) => b[1] - a[1]).map(([v, c]) => `${c} on ${v}`);
    return `${n} ${n === 1 ? 'SVM' : 'SVMs'}${parts.length ? ': ' + parts.join(', ') : ''}`;
  }

  ask(b: Bundle): void {
    this.asked = b;
    this.askError.set(null);
    this.asking = true;
  }

  async start(): Promise<void> {
    const sys = this.system();
    if (!this.asked || !sys) {
      return;
    }
    this.starting.set(true);
    try {
      const hosts = this.chosen();
      await this.api.startUpgrade(sys, hosts.length ? { version: this.asked.version, hosts } : { version: this.asked.version });
      this.asking = false;
      this.msgErr.set(false);
      this.msg.set(`Upgrade to ${this.asked.version} started: follow it above and in the SVMs table.`);
      await this.store.refresh();
    } catch (e) {
      // 403 (the privilege it needs, on which object), 409 (another job
      // runs on the system, or it is not fully deployed): the server's
      // words, which say what to do.
      this.askError.set(e instanceof ApiError ? e.message : String(e));
    } finally {
      this.starting.set(false);
    }
  }

  async stop(sys: string): Promise<void> {
    try {
      await this.api.stopUpgrade(sys);
      this.stopAsked.set(true);
      this.msgErr.set(false);
      // The server's answer speaks of the API ("send the same request"):
      // the page says it in its own controls' words.
      this.msg.set('Stop asked: the roll stops once the SVM unit it is on is upgraded, out of maintenance and resynced. Upgrade to the same version again to go on.');
    } catch (e) {
      this.msgErr.set(true);
      this.msg.set(e instanceof ApiError ? e.message : String(e));
    }
  }
}
