import { Component, OnDestroy, OnInit, computed, inject } from '@angular/core';
import { ActivatedRoute } from '@angular/router';
import { ClarityModule } from '@clr/angular';
import { ApiService } from '../core/api.service';
import { bytes } from '../core/format';
import { SdkService } from '../core/sdk.service';
import { StoreService } from '../core/store.service';
import { MessageComponent } from '../shared/message.component';

// HostComponent is the host's Summary card and Configure view: the Cairn
// system the host belongs to and its SDS (on the SVM named after it).
@Component({
  selector: 'cairn-host',
  imports: [ClarityModule, MessageComponent],
  template: `
    <div class="cairn-page">
      @if (!summary) {
        <h1 cds-text="title">Cairn SVM</h1>
      }
      @if (hostName(); as h) {
        @if (system(); as s) {
          <p>Host <strong>{{ h }}</strong> is part of Cairn system <strong>{{ s.name }}</strong>.</p>
          @if (sds(); as d) {
            <p>
              SDS {{ d.name }}:
              <span class="label" [class.label-success]="d.up" [class.label-danger]="!d.up">{{ d.up ? 'up' : 'down' }}</span>
              {{ d.state }}
            </p>
            <p>{{ devices().length }} devices, {{ capacity() }}</p>
          } @else if (s.unavailable) {
            <p class="cairn-muted">{{ s.unavailable }}</p>
          } @else {
            <p class="cairn-muted">This host has no SDS (no data role).</p>
          }
        } @else if (store.systems() !== null) {
          <p>Host <strong>{{ h }}</strong> is not part of a Cairn system.</p>
        }
      } @else {
        <p class="cairn-muted">Open this view on a host to see its Cairn SVM.</p>
      }
      @if (store.error(); as err) {
        <p class="error-text" role="alert"><cairn-message [text]="err" /></p>
      }
    </div>
  `,
})
export class HostComponent implements OnInit, OnDestroy {
  readonly store = inject(StoreService);
  private sdk = inject(SdkService);
  private api = inject(ApiService);
  readonly summary = !!inject(ActivatedRoute).snapshot.data['summary'];
  private stop: (() => void) | null = null;
  private moref: string | null = null;
  private inventoryName: string | null = null;

  readonly hostName = computed(() => {
    this.store.systems();
    return this.inventoryName;
  });
  readonly system = computed(() => (this.store.systems() ?? []).find((s) => (s.hosts ?? []).includes(this.hostName() ?? '')));
  readonly sds = computed(() => {
    const h = this.hostName() ?? '';
    const short = h.split('.')[0];
    return (this.system()?.sdss ?? []).find((d) => d.name === h || d.name.includes(short));
  });
  readonly devices = computed(() => (this.system()?.devices ?? []).filter((d) => d.sds_id === this.sds()?.id));
  readonly capacity = computed(() => bytes(this.devices().reduce((a, d) => a + d.capacity, 0)));

  async ngOnInit(): Promise<void> {
    this.moref = this.sdk.contextObject()?.moref ?? new URLSearchParams(window.location.search).get('host');
    if (this.moref) {
      try {
        const inv = await this.api.inventory();
        const all = inv.datacenters.flatMap((d) => d.hosts ?? []);
        this.inventoryName = all.find((h) => h.moref === this.moref || h.name === this.moref)?.name ?? null;
      } catch (e) {
        this.store.error.set(e instanceof Error ? e.message : String(e));
      }
    }
    this.stop = this.store.watch(5000);
  }

  ngOnDestroy(): void {
    this.stop?.();
  }
}
