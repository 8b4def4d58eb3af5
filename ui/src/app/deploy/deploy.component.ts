import { Component, OnDestroy, ViewChild, computed, inject, signal } from '@angular/core';
import { DatePipe, NgTemplateOutlet } from '@angular/common';
import { FormsModule } from '@angular/forms';
import { ClarityModule, ClrWizard } from '@clr/angular';
import { ApiError, ApiService } from '../core/api.service';
import { addresses, bytes, duplicates } from '../core/format';
import { STEPS, STEP_TITLES, Step, problemsFor, stepFor } from '../core/problems';
import { Datacenter, InventoryHost, Job, Plan, PlanHost, Problem, ProgressEvent, ROLES, Role } from '../core/types';
import { fillAddresses, mdmSummary, planJSON, roleBlocker, setHosts, toggleRole } from './plan-edit';
import { MessageComponent } from '../shared/message.component';

const ROLE_LABELS: Record<Role, string> = {
  mdm: 'MDM voter',
  tiebreaker: 'Tie-breaker',
  sds: 'SDS (data)',
  target: 'iSCSI target',
  gateway: 'Gateway',
};

// DeployComponent is the deployment wizard: ScaleIO's steps, each one
// checked by the plugin server's plan validator before the next.
@Component({
  selector: 'cairn-deploy',
  imports: [ClarityModule, FormsModule, DatePipe, MessageComponent, NgTemplateOutlet],
  templateUrl: './deploy.component.html',
  styles: `
    .wide { width: 100%; }
    td .reason { display: block; font-size: 0.55rem; color: var(--cds-global-typography-color-300, #565656); }
    pre.plan { max-height: 14rem; overflow: auto; font-size: 0.6rem; }
    .hostgrid td, .hostgrid th { vertical-align: middle; }
    .nowrap { white-space: nowrap; }
    .warn-text { color: var(--cds-alias-status-warning-dark, #8c5d00); }
  `,
})
export class DeployComponent implements OnDestroy {
  private api = inject(ApiService);
  @ViewChild('wizard') wizard?: ClrWizard;

  readonly roles = ROLES;
  readonly roleLabels = ROLE_LABELS;
  readonly titles = STEP_TITLES;
  open = false;
  readonly loading = signal(false);
  readonly error = signal<string | null>(null);
  readonly problems = signal<Problem[]>([]);
  readonly checked = signal<Set<Step>>(new Set());
  readonly busy = signal(false);

  // System page inputs (the plan is suggested from them).
  dc: Datacenter | null = null;
  datacenters: Datacenter[] = [];
  system = 'cairn1';
  template = '';
  svmCIDR = '10.20.0.0/24';
  iscsiCIDR = '10.30.0.0/24';
  svmStart = '';
  vmkStart = '';
  rangeError = '';
  plan: Plan | null = null;
  private suggestedFor = '';

  // Deploy page.
  readonly job = signal<Job | null>(null);
  readonly log = signal<ProgressEvent[]>([]);
  private stream: AbortController | null = null;
  private poll: ReturnType<typeof setInterval> | null = null;

  readonly newestFirst = computed(() => [...this.log()].reverse());

  readonly perHost = computed(() => {
    const m = new Map<string, ProgressEvent>();
    for (const e of this.log()) {
      if (e.host) {
        m.set(e.host, e);
      }
    }
    return (this.plan?.hosts ?? []).map((h) => ({ host: h.name, last: m.get(h.name) }));
  });

  async start(): Promise<void> {
    this.error.set(null);
    this.loading.set(true);
    try {
      const inv = await this.api.inventory();
      this.datacenters = inv.datacenters;
      this.dc = inv.datacenters.find((d) => (d.clusters ?? []).length > 0) ?? inv.datacenters[0] ?? null;
      this.template = this.dc?.templates?.[0]?.name ?? '';
      this.plan = null;
      this.suggestedFor = '';
      this.problems.set([]);
      this.checked.set(new Set());
      this.job.set(null);
      this.log.set([]);
      this.open = true;
    } catch (e) {
      this.error.set(e instanceof Error ? e.message : String(e));
    } finally {
      this.loading.set(false);
    }
  }

  // --- inventory helpers

  clusterHosts(): InventoryHost[] {
    const names = new Set((this.dc?.clusters ?? []).flatMap((c) => c.hosts));
    return (this.dc?.hosts ?? []).filter((h) => names.has(h.name));
  }

  invHost(name: string): InventoryHost | undefined {
    return (this.dc?.hosts ?? []).find((h) => h.name === name);
  }

  hostBlocker(h: InventoryHost): string | null {
    if (h.connection_state !== 'connected') {
      return `${h.connection_state}: reconnect it in vCenter`;
    }
    if (h.in_maintenance) {
      return 'in maintenance mode: exit it first';
    }
    return null;
  }

  selected(name: string): boolean {
    return !!this.plan?.hosts.some((h) => h.name === name);
  }

  toggleHost(name: string, on: boolean): void {
    if (!this.plan) {
      return;
    }
    const names = this.clusterHosts()
      .map((h) => h.name)
      .filter((n) => (n === name ? on : this.selected(n)));
    setHosts(this.plan, names);
  }

  blocker(ph: PlanHost, role: Role): string | null {
    return roleBlocker(this.invHost(ph.name), ph, role);
  }

  setRole(ph: PlanHost, role: Role, on: boolean): void {
    toggleRole(ph, role, on);
  }

  mdm(): string {
    return this.plan ? mdmSummary(this.plan).text : '';
  }

  sdsHosts(): PlanHost[] {
    return (this.plan?.hosts ?? []).filter((h) => h.roles.includes('sds'));
  }

  svmHosts(): PlanHost[] {
    return (this.plan?.hosts ?? []).filter((h) => h.roles.length > 0);
  }

  oneFaultSetPerHost(): void {
    this.sdsHosts().forEach((h, i) => (h.fault_set = `fs${i + 1}`));
  }

  noFaultSets(): void {
    this.plan?.hosts.forEach((h) => delete h.fault_set);
  }

  hasDisk(ph: PlanHost, disk: string): boolean {
    return !!ph.devices?.some((d) => d.disk === disk);
  }

  setDisk(ph: PlanHost, disk: string, on: boolean): void {
    const rest = (ph.devices ?? []).filter((d) => d.disk !== disk);
    ph.devices = on ? [...rest, { disk, mode: 'rdm' }] : rest;
  }

  hasPCI(ph: PlanHost, pci: string): boolean {
    return !!ph.devices?.some((d) => d.pci === pci);
  }

  setPCI(ph: PlanHost, pci: string, on: boolean): void {
    const rest = (ph.devices ?? []).filter((d) => d.pci !== pci);
    ph.devices = on ? [...rest, { pci, mode: 'passthrough' }] : rest;
  }

  size(n: number): string {
    return bytes(n);
  }

  fill(): void {
    if (!this.plan) {
      return;
    }
    this.rangeError = '';
    const n = this.svmHosts().length;
    const svm = addresses(this.svmStart, n);
    if (typeof svm === 'string') {
      this.rangeError = 'SVM addresses: ' + svm;
      return;
    }
    fillAddresses(this.plan, 'svm_ip', svm);
    if (this.vmkStart) {
      const vmk = addresses(this.vmkStart, this.plan.hosts.length);
      if (typeof vmk === 'string') {
        this.rangeError = 'vmkernel addresses: ' + vmk;
        return;
      }
      fillAddresses(this.plan, 'vmkernel_ip', vmk);
    }
  }

  conflicts(): string[] {
    const p = this.plan;
    if (!p) {
      return [];
    }
    return duplicates([...p.hosts.map((h) => h.svm_ip), ...p.hosts.map((h) => h.vmkernel_ip), p.network.gateway]);
  }

  // portgroups offers the datacenter's networks plus current (a port
  // group the deployment creates, such as the iSCSI one, is not there yet).
  portgroups(current: string): string[] {
    const names = (this.dc?.networks ?? []).map((n) => n.name);
    return current && !names.includes(current) ? [current, ...names] : names;
  }

  dns(): string {
    return (this.plan?.network.dns ?? []).join(', ');
  }

  setDNS(v: string): void {
    if (this.plan) {
      this.plan.network.dns = v
        .split(/[\s,]+/)
        .map((s) => s.trim())
        .filter(Boolean);
    }
  }

  // --- validation per step

  stepProblems(step: Step): Problem[] {
    return this.checked().has(step) ? problemsFor(this.problems(), step) : [];
  }

  hasErrors(step: Step): boolean {
    return this.stepProblems(step).some((p) => p.severity === 'error');
  }

  hostName(p: Problem): string {
    const m = /^hosts\[(\d+)\]/.exec(p.field);
    return m && this.plan ? (this.plan.hosts[Number(m[1])]?.name ?? '') : '';
  }

  // next validates the plan and moves on when step (and the steps before
  // it) have no error; the reasons stay on the page that owns them.
  async next(step: Step): Promise<void> {
    this.error.set(null);
    this.busy.set(true);
    try {
      if (step === 'system') {
        await this.suggest();
      }
      if (!this.plan) {
        return;
      }
      const v = await this.api.validate(this.plan);
      this.problems.set(v.problems);
      const upto = STEPS.slice(0, STEPS.indexOf(step) + 1);
      this.checked.set(new Set(upto));
      const blocking = v.problems.filter((p) => p.severity === 'error' && upto.includes(stepFor(p)));
      if (blocking.length === 0) {
        this.wizard?.forceNext();
      } else if (stepFor(blocking[0]) !== step) {
        this.error.set(`An earlier page has a problem: ${STEP_TITLES[stepFor(blocking[0])]}: ${blocking[0].message}. Go back to fix it.`);
      }
    } catch (e) {
      this.error.set(e instanceof ApiError ? e.message : String(e));
    } finally {
      this.busy.set(false);
    }
  }

  private async suggest(): Promise<void> {
    const key = [this.dc?.name, this.system, this.template, this.svmCIDR, this.iscsiCIDR].join('|');
    if (this.plan && key === this.suggestedFor) {
      this.plan.system = this.system;
      return;
    }
    this.plan = await this.api.suggest({
      datacenter: this.dc?.name ?? '',
      system: this.system,
      template: this.template,
      svm_cidr: this.svmCIDR,
      iscsi_cidr: this.iscsiCIDR,
    });
    this.suggestedFor = key;
    this.svmStart = this.plan.hosts.find((h) => h.svm_ip)?.svm_ip ?? '';
    this.vmkStart = this.plan.hosts.find((h) => h.vmkernel_ip)?.vmkernel_ip ?? '';
  }

  // --- review and deploy

  json(): string {
    return this.plan ? planJSON(this.plan) : '';
  }

  download(): void {
    if (!this.plan) {
      return;
    }
    const url = URL.createObjectURL(new Blob([this.json()], { type: 'application/json' }));
    const a = document.createElement('a');
    a.href = url;
    a.download = `cairn-plan-${this.plan.system}.json`;
    a.click();
    URL.revokeObjectURL(url);
  }

  async deploy(): Promise<void> {
    if (!this.plan) {
      return;
    }
    this.busy.set(true);
    this.error.set(null);
    try {
      const v = await this.api.validate(this.plan);
      this.problems.set(v.problems);
      this.checked.set(new Set(STEPS));
      if (!v.valid) {
        this.error.set('The plan has errors (shown on their pages): fix them before deploying.');
        return;
      }
      this.job.set(await this.api.deploy(this.plan));
      this.wizard?.forceNext();
      this.follow();
    } catch (e) {
      this.error.set(e instanceof ApiError ? e.message : String(e));
    } finally {
      this.busy.set(false);
    }
  }

  // resume runs the same plan again: the engine skips the steps done.
  async resume(): Promise<void> {
    if (!this.plan) {
      return;
    }
    this.error.set(null);
    try {
      this.job.set(await this.api.deploy(this.plan));
      this.follow();
    } catch (e) {
      this.error.set(e instanceof ApiError ? e.message : String(e));
    }
  }

  private follow(): void {
    const name = this.job()?.name;
    if (!name) {
      return;
    }
    this.stream?.abort();
    const ctl = new AbortController();
    this.stream = ctl;
    const after = this.log().at(-1)?.seq ?? 0;
    this.api
      .events(name, after, (e) => this.log.update((l) => [...l.slice(-999), e]), ctl.signal)
      .catch((e: unknown) => this.error.set(e instanceof Error ? e.message : String(e)));
    if (this.poll) {
      clearInterval(this.poll);
    }
    this.poll = setInterval(async () => {
      try {
        const j = (await this.api.jobs()).find((x) => x.name === name);
        if (j) {
          this.job.set(j);
          if (j.state !== 'running' && this.poll) {
            clearInterval(this.poll);
            this.poll = null;
          }
        }
      } catch {
        // the next tick retries; the stream shows the rest
      }
    }, 1000);
  }

  close(): void {
    this.open = false;
  }

  ngOnDestroy(): void {
    this.stream?.abort();
    if (this.poll) {
      clearInterval(this.poll);
    }
  }
}
