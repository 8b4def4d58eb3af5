import { Component, inject } from '@angular/core';
import { RouterLink, RouterLinkActive, RouterOutlet } from '@angular/router';
import { ClarityModule } from '@clr/angular';
import { ApiService } from '../core/api.service';
import { SdkService } from '../core/sdk.service';

// GlobalComponent is the plugin's global view (Menu > Cairn): the pages
// a ScaleIO admin expects, in their order.
@Component({
  selector: 'cairn-global',
  imports: [ClarityModule, RouterOutlet, RouterLink, RouterLinkActive],
  styles: `
    .header-actions { align-items: center; gap: 0.8rem; padding-right: 1rem; }
    .theme-toggle { margin: 0; }
  `,
  template: `
    <div class="main-container">
      @if (!sdk.embedded) {
        <header class="header header-6">
          <div class="branding">
            <a class="nav-link" routerLink="/global/dashboard"><span class="title">Cairn</span></a>
          </div>
          <div class="header-actions">
            <span class="nav-text cairn-user">{{ api.user() }}</span>
            <button type="button" class="btn btn-sm btn-inverse theme-toggle" (click)="theme()" [attr.aria-label]="'Switch to ' + (sdk.theme() === 'dark' ? 'light' : 'dark') + ' theme'">
              {{ sdk.theme() === 'dark' ? 'Light' : 'Dark' }} theme
            </button>
          </div>
        </header>
      }
      <nav class="subnav" aria-label="Cairn pages">
        <ul class="nav">
          @for (p of pages; track p.path) {
            <li class="nav-item">
              <a class="nav-link" [routerLink]="p.path" routerLinkActive="active" ariaCurrentWhenActive="page">{{ p.title }}</a>
            </li>
          }
        </ul>
      </nav>
      <div class="content-container">
        <main class="content-area" id="main">
          <router-outlet />
        </main>
      </div>
    </div>
  `,
})
export class GlobalComponent {
  readonly api = inject(ApiService);
  readonly sdk = inject(SdkService);
  readonly pages = [
    { path: 'dashboard', title: 'Dashboard' },
    { path: 'deploy', title: 'Deploy' },
    { path: 'sds', title: 'SDSs and devices' },
    { path: 'volumes', title: 'Volumes' },
    { path: 'maintenance', title: 'Maintenance' },
    { path: 'upgrade', title: 'Upgrade' },
  ];

  theme(): void {
    this.sdk.applyTheme(this.sdk.theme() === 'dark' ? 'light' : 'dark');
  }
}
