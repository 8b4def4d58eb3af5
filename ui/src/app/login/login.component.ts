import { Component, inject, signal } from '@angular/core';
import { FormsModule } from '@angular/forms';
import { ActivatedRoute, Router } from '@angular/router';
import { ClarityModule } from '@clr/angular';
import { ApiService } from '../core/api.service';

// LoginComponent is the standalone sign-in (outside the vSphere Client):
// a vCenter user, checked by vCenter itself.
@Component({
  selector: 'cairn-login',
  imports: [FormsModule, ClarityModule],
  template: `
    <main class="login-wrapper">
      <form class="login" (ngSubmit)="submit()" aria-labelledby="login-title">
        <section class="title">
          <h1 id="login-title" class="welcome">Cairn</h1>
          <span class="hint">Software-defined storage for vSphere. Sign in with your vCenter account.</span>
        </section>
        <div class="login-group">
          <clr-input-container>
            <label for="username">vCenter user name</label>
            <input clrInput id="username" name="username" type="text" autocomplete="username" [(ngModel)]="username" required placeholder="administrator@vsphere.local" />
          </clr-input-container>
          <clr-password-container>
            <label for="password">Password</label>
            <input clrPassword id="password" name="password" autocomplete="current-password" [(ngModel)]="password" required />
          </clr-password-container>
          @if (error()) {
            <div class="error active" role="alert" id="login-error">{{ error() }}</div>
          }
          <button type="submit" class="btn btn-primary" [disabled]="busy()">{{ busy() ? 'Signing in…' : 'Sign in' }}</button>
        </div>
      </form>
    </main>
  `,
})
export class LoginComponent {
  private api = inject(ApiService);
  private router = inject(Router);
  private route = inject(ActivatedRoute);
  username = '';
  password = '';
  readonly error = signal<string | null>(null);
  readonly busy = signal(false);

  async submit(): Promise<void> {
    if (!this.username) {
      this.error.set('Give your vCenter user name, e.g. administrator@vsphere.local.');
      return;
    }
    this.busy.set(true);
    this.error.set(null);
    try {
      await this.api.login(this.username, this.password);
      const next = this.route.snapshot.queryParamMap.get('next') || '/global';
      await this.router.navigateByUrl(next);
    } catch (e) {
      this.error.set(e instanceof Error ? e.message : String(e));
    } finally {
      this.busy.set(false);
    }
  }
}
