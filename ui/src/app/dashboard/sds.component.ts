import { Component, OnDestroy, OnInit, inject } from '@angular/core';
import { ClarityModule } from '@clr/angular';
import { bytes } from '../core/format';
import { StoreService } from '../core/store.service';
import { SystemView } from '../core/types';

// SdsComponent: the SDSs and their devices, per system (datagrids).
@Component({
  selector: 'cairn-sds',
  imports: [ClarityModule],
  template: `
    <div class="cairn-page">
      <h1 cds-text="title">SDSs and devices</h1>
      @if (store.error(); as err) {
        <clr-alert clrAlertType="danger" [clrAlertClosable]="false"><clr-alert-item><span class="alert-text">{{ err }}</span></clr-alert-item></clr-alert>
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
            <clr-dg-row *clrDgItems="let d of s.sdss ?? []" [clrDgItem]="d">
              <clr-dg-cell>{{ d.name }}</clr-dg-cell>
              <clr-dg-cell>{{ d.address }}</clr-dg-cell>
              <clr-dg-cell>{{ d.state }}{{ d.maintenance?.state ? ' (' + d.maintenance?.state + ')' : '' }}</clr-dg-cell>
              <clr-dg-cell>
                <span class="label" [class.label-success]="d.up" [class.label-danger]="!d.up">{{ d.up ? 'up' : 'down' }}</span>
              </clr-dg-cell>
              <clr-dg-cell>{{ devicesOf(s, d.id).length }}</clr-dg-cell>
              <clr-dg-cell>{{ capacityOf(s, d.id) }}</clr-dg-cell>
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
            <clr-dg-row *clrDgItems="let v of s.devices ?? []" [clrDgItem]="v">
              <clr-dg-cell>{{ v.name || v.id }}</clr-dg-cell>
              <clr-dg-cell>{{ sdsName(s, v.sds_id) }}</clr-dg-cell>
              <clr-dg-cell>{{ v.path }}</clr-dg-cell>
              <clr-dg-cell>{{ v.state }}</clr-dg-cell>
              <clr-dg-cell>{{ size(v.capacity) }}</clr-dg-cell>
            </clr-dg-row>
            <clr-dg-footer>{{ s.devices?.length ?? 0 }} devices</clr-dg-footer>
          </clr-datagrid>
          <p class="cairn-muted">Adding a device: <code>cairnctl device create</code> for now (the plugin server has no route for it yet). Removing a device with drain progress is not available in this version.</p>
        }
      } @empty {
        <p>No system deployed yet.</p>
      }
    </div>
  `,
})
export class SdsComponent implements OnInit, OnDestroy {
  readonly store = inject(StoreService);
  private stop: (() => void) | null = null;

  ngOnInit(): void {
    this.stop = this.store.watch();
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

  size(n: number): string {
    return bytes(n);
  }
}
